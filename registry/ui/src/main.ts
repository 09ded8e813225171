/** The bundle's entry: each page names itself in `<body data-page>`; its module draws it. */
import { browse } from './browse.js';
import { dashboard } from './dashboard.js';
import { message } from './dom.js';
import { statusPage } from './status.js';
import { statsPage } from './stats.js';

async function start(): Promise<void> {
  const page = document.body.dataset.page;
  const app = document.getElementById('app');
  try {
    if (page === 'dashboard') await dashboard();
    else if (page === 'status' && app) await statusPage(app);
    else if (page === 'browse' && app) await browse(app);
    else if (page === 'stats' && app) await statsPage(app);
  } catch (err) {
    (app ?? document.getElementById('main'))?.append(message(err instanceof Error ? err.message : String(err), 'error'));
  }
}

void start();
