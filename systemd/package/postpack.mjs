// `npm pack`'s postpack: the repository's package.json back in place (see manifest.mjs).
import { restoreManifest } from './manifest.mjs';

restoreManifest();
