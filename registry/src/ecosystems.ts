/** The composition root's list of ecosystems: the one place that names them all. */
import type { EcosystemFactory } from './http/ecosystem.js';
import { createPythonEcosystem } from './python/index.js';
import { createOciEcosystem } from './oci/index.js';

export const ecosystems: EcosystemFactory[] = [createPythonEcosystem, createOciEcosystem];
