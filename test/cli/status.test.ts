import t from 'tap';
import { formatFleet, formatStatus } from '../../src/cli/status.js';
import type { StatusReport } from '../../src/server/status-report.js';

const REPORT: StatusReport = {
  uptime_s: 12,
  chains: {},
  ledger: { last_flush_at: '2026-01-31T12:00:00.000Z', last_flush_ok: true, flush_failures: 0 },
};

t.test('the fleet section: every instance, this one starred, its info escaped to one line', async (t) => {
  const text = formatStatus({
    ...REPORT,
    fleet: {
      this_instance: 'b:8545',
      error: null,
      instances: [
        {
          id: 'a:8545',
          started_at: '2026-01-31T11:00:00.000Z',
          last_heartbeat_at: '2026-01-31T12:00:01.000Z',
          heartbeat_age_s: 2,
          info: { version: '1.2.0', host: 'x\ny' },
        },
        {
          id: 'b:8545',
          started_at: '2026-01-31T11:30:00.000Z',
          last_heartbeat_at: '2026-01-31T12:00:02.000Z',
          heartbeat_age_s: 1,
          info: {},
        },
      ],
    },
  });
  t.equal(
    text,
    [
      'chaingate up 12 s',
      '',
      'ledger: last flush 2026-01-31T12:00:00.000Z, 0 failed flushes since start',
      '',
      'fleet: 2 instances (* this one, b:8545)',
      '  instance  started               last heartbeat        age      info',
      '  a:8545    2026-01-31 11:00:00Z  2026-01-31 12:00:01Z  2 s ago  version=1.2.0 host=x\\ny',
      '  b:8545 *  2026-01-31 11:30:00Z  2026-01-31 12:00:02Z  1 s ago',
      '',
    ].join('\n'),
  );
});

t.test('no fleet section on one machine; a fleet whose store failed says why', async (t) => {
  t.notMatch(formatStatus(REPORT), 'fleet');
  t.same(formatFleet({ this_instance: 'a:1', instances: [], error: 'connect ECONNREFUSED 127.0.0.1:5432' }), [
    'fleet: this instance a:1; the instances could not be read: connect ECONNREFUSED 127.0.0.1:5432',
  ]);
});

t.test('each upstream’s state: in rotation, out for a reason, or out serving another chain', async (t) => {
  const upstream = { head: 10, lag: 0, serves: '1' };
  const text = formatStatus({
    ...REPORT,
    chains: {
      mainnet: {
        ready: true,
        best_head: 12,
        served_head: 10,
        finalized_block: 4,
        safe_block: 8,
        requests_per_s_1m: 0,
        ws_connections: 0,
        subscriptions: 0,
        event_streams: 0,
        upstreams: [
          { name: 'right', in_rotation: true, reason: null, ...upstream },
          { name: 'down', in_rotation: false, reason: 'failing', ...upstream, head: null, lag: null },
          { name: 'anvil', in_rotation: false, reason: 'wrong_chain', ...upstream, serves: '31337' },
          { name: 'maint', in_rotation: false, reason: 'cordoned', ...upstream },
          { name: 'found', in_rotation: true, reason: null, ...upstream, archive: 'true (auto)', methods: 'all but debug_* (auto)' },
        ],
      },
    },
  });
  t.match(text, 'mainnet: ready, head 12, served 10, safe 8, finalized 4, ', 'the best head, the head served, safe and finalized');
  t.match(text, /right\s+in rotation\s+10\s+0/);
  t.match(text, /down\s+out \(failing\)\s+–/);
  t.match(text, /anvil\s+out \(serves 31337\)\s+10/);
  t.match(text, /maint\s+out \(cordoned\)\s+10/);
  t.match(text, /found\s+in rotation, archive: true \(auto\), methods: all but debug_\* \(auto\)\s+10/);
});

t.test('with worker threads: a line says every one answered, or which did not', async (t) => {
  t.notMatch(formatStatus(REPORT), 'workers', 'none on one thread');
  t.match(formatStatus({ ...REPORT, workers: { count: 3, unanswered: [] } }), '\nworkers: 3, every one answered\n');
  t.match(
    formatStatus({ ...REPORT, workers: { count: 3, unanswered: [1, 3] } }),
    '\nworkers: 3; worker 1, 3 did not answer in time (stalled?): their connections and requests are missing above\n',
  );
});
