/** The `tracing` section: OpenTelemetry traces of calls over OTLP/HTTP (src/pipeline/tracing.ts), off by default. */
import type { Static } from './typebox.js';
import { num, section, text, url } from './keys.js';
import { Type } from './typebox.js';

export const TracingSchema = section(
  {
    otlp_endpoint: Type.Optional(
      url(
        'http-url',
        'Where spans are sent, an OTLP/HTTP traces URL (e.g. http://collector:4318/v1/traces); absent: tracing is off. A reload applies it.',
      ),
    ),
    sample_ratio: num(
      0,
      1,
      0.01,
      'The share of calls traced, from 0 to 1, decided once as a call starts (0.01: 1 in 100). A reload applies it.',
    ),
    service_name: text('chaingate', "The spans' service.name. A reload applies it."),
  },
  'OpenTelemetry traces: a span per call and one per upstream attempt, sent over OTLP/HTTP. Off unless otlp_endpoint is set.',
);

export type TracingConfig = Static<typeof TracingSchema>;
