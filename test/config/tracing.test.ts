/** The `tracing` section: off by default, its refusals naming the key, and a change a reload applies. */
import t from 'tap';
import { validateConfig } from '../../src/config/schema.js';
import { restartOnlyChanges } from '../../src/config/restart-keys.js';

const chains = { devnet: { chain_id: 1, upstreams: [{ url: 'http://127.0.0.1:1' }] } };

function errorsOf(tracing: unknown): string[] {
  const r = validateConfig({ chains, tracing });
  return r.ok ? [] : r.errors;
}

t.test('off by default, with its defaults filled in', async (t) => {
  const r = validateConfig({ chains });
  if (!r.ok) throw new Error(r.errors.join('\n'));
  t.same(r.config.tracing, { sample_ratio: 0.01, service_name: 'chaingate' }, 'no endpoint: tracing off');
});

t.test('an endpoint and a ratio are taken as given', async (t) => {
  const r = validateConfig({ chains, tracing: { otlp_endpoint: 'https://collector.example:4318/v1/traces', sample_ratio: 1 } });
  if (!r.ok) throw new Error(r.errors.join('\n'));
  t.equal(r.config.tracing.otlp_endpoint, 'https://collector.example:4318/v1/traces');
  t.equal(r.config.tracing.sample_ratio, 1);
});

t.test('refusals name the key', async (t) => {
  t.match(errorsOf({ otlp_endpoint: 'grpc://collector:4317' }).join('\n'), /tracing\.otlp_endpoint/, 'a URL that is not http(s)');
  t.match(errorsOf({ otlp_endpoint: 'http://x', sample_ratio: 1.5 }).join('\n'), /tracing\.sample_ratio/, 'a ratio above 1');
  t.match(errorsOf({ sample_ratio: -0.1 }).join('\n'), /tracing\.sample_ratio/, 'a ratio below 0');
  t.match(errorsOf({ endpoint: 'http://x' }).join('\n'), /tracing.*otlp_endpoint/, 'an unknown key, the known ones listed');
});

t.test('a change of tracing needs no restart: a reload applies it (src/pipeline/tracing.ts reloadTracing)', async (t) => {
  const a = validateConfig({ chains });
  const b = validateConfig({ chains, tracing: { otlp_endpoint: 'http://user:secret@collector:4318/v1/traces', sample_ratio: 0.5 } });
  if (!a.ok || !b.ok) throw new Error('valid configs');
  t.same(restartOnlyChanges(a.config, b.config), []);
  t.same(restartOnlyChanges(b.config, a.config), []);
});
