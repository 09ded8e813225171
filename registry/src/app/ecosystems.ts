/**
 * The composition root's list of ecosystems: the one place that names them all. The first is the
 * default of an index that names no `ecosystem`. Adding one is a folder with its facts and its
 * factory, and a line here.
 */
import type { EcosystemModule } from '../ecosystem/ecosystem.js';
import { classifyOci, ociTooManyRequests } from '../oci/classify.js';
import { ociFacts } from '../oci/facts.js';
import { createOciEcosystem } from '../oci/index.js';
import { ociHoldsMarker } from '../oci/lifecycle/holds-marker.js';
import { classifyPython } from '../python/classify.js';
import { pythonFacts } from '../python/facts.js';
import { createPythonEcosystem } from '../python/index.js';
import { pythonHoldsMarker } from '../python/lifecycle.js';

export const ecosystems: readonly EcosystemModule[] = [
  { ...pythonFacts, create: createPythonEcosystem, metadataSiblings: true, classifyIndexRequest: classifyPython, holdsMarker: pythonHoldsMarker },
  { ...ociFacts, create: createOciEcosystem, tree: { segment: 'v2', classify: classifyOci, tooManyRequests: ociTooManyRequests }, holdsMarker: ociHoldsMarker },
];
