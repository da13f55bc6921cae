/**
 * Loaded into every test process after tap's own hooks (package.json `tap.node-arg`). tap's processinfo
 * adds its loader to the NODE_OPTIONS of every child process a test spawns (through process-on-spawn), so
 * that each reports to it: that serves coverage only, which is off here, and costs each Node child nearly
 * a second of CPU. A spawn listener added after processinfo's takes its loader out again, so the daemons,
 * CLI runs and fixtures the tests spawn start as they would outside the tests; so does taking it out of
 * this process's own NODE_OPTIONS for the worker threads a gateway under test starts.
 */
function withoutProcessinfo(env) {
  const options = (env.NODE_OPTIONS ?? '').split(/\s+/).filter((o) => o !== '' && !o.includes('@tapjs/processinfo'));
  if (options.length > 0) env.NODE_OPTIONS = options.join(' ');
  else delete env.NODE_OPTIONS;
}

const spawnHooks = globalThis[Symbol.for('process-on-spawn@*:singletonId')];
spawnHooks?.listeners.push((spawned) => {
  const env = { ...spawned.env };
  withoutProcessinfo(env);
  for (const name of Object.keys(env)) if (name.startsWith('_TAPJS_PROCESSINFO_')) delete env[name];
  spawned.env = env;
});

// A worker thread loads the NODE_OPTIONS' `--import` hooks of its process too: processinfo's took more
// than a second of each gateway's start with two workers. This process's own hooks ran long ago.
withoutProcessinfo(process.env);
