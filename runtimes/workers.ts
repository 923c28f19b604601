// Cloudflare Workers entrypoint (`wrangler dev`, `wrangler deploy`; see wrangler.toml and docs/workers.md).
// config.yaml and resources.yaml are bundled as text at build time (wrangler.toml's `[[rules]]` Text for
// `*.yaml`); to ship your own, edit examples/workers/ or point these two imports at your files.
import config from '../examples/workers/config.yaml';
import resources from '../examples/workers/resources.yaml';
import { createWorker } from './workers-handler.ts';

export default createWorker({
  configPath: 'examples/workers/config.yaml',
  files: { 'examples/workers/config.yaml': config, 'examples/workers/resources.yaml': resources },
});
