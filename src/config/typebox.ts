/**
 * The schema library as the config reads it, through this one module: the build bundles it into one
 * file (dist/config/typebox.js, by esbuild). Imported as its 266 separate ES modules, TypeBox added 8 MB
 * to the gateway's resident memory for the life of the process; bundled, 1.4 MB (docs/decisions.md).
 */
export * from '@sinclair/typebox';
export { Errors, type ValueError, ValueErrorType } from '@sinclair/typebox/errors';
