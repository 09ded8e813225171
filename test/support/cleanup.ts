/** vitest setup file: every test file's temp folders go when the file is done (temp-dirs.ts). */
import { afterAll } from 'vitest';
import { removeTempDirs } from './temp-dirs.js';

afterAll(() => {
  removeTempDirs();
});
