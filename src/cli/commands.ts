// The one table of chaingate's commands: each command's words, arguments, options, meaning and exit
// statuses are declared here once, and the help (help.ts), the reading of a command line
// (command-line.ts) and the check that the README lists every command (test/cli/commands.test.ts) all
// read it, so they cannot drift apart.
import type { FenceSettings } from '../fences/settings.js';
import { MAX_NAME_LENGTH } from '../tenancy/names.js';
import { MAX_RU } from '../tenancy/owners.js';

/** One option of a command. */
export interface OptionSpec {
  /** Its name without the dashes: `config` for `--config`. */
  readonly name: string;
  /** The placeholder of its value (`FILE`); absent for a flag that takes none (`--json`). */
  readonly value?: string;
  /** Refused when left out (`missing --name NAME`, exit 2). */
  readonly required?: boolean;
  /** A list: comma-separated, or the option repeated (its values joined with commas). */
  readonly list?: boolean;
  /** What it means, one line. */
  readonly text: string;
}

/** One command. */
export interface CommandSpec {
  /** The words naming it after `chaingate`: `owner key create`. */
  readonly words: string;
  /** Its positional arguments, as its usage shows them (`ID`, `PLAN`); a command takes no more. */
  readonly args: readonly string[];
  readonly options: readonly OptionSpec[];
  /** What it does, one line (the overview's). */
  readonly summary: string;
  /** More of what it does, for its own help: paragraphs, already wrapped. */
  readonly details?: string;
  /** Its exit statuses, e.g. `0 done; 1 refused ...; 2 bad arguments`. */
  readonly exit: string;
  /** The heading it is listed under in the overview. */
  readonly group: CommandGroup;
}

export type CommandGroup = 'gateway' | 'accounts' | 'stores' | 'other';

export const GROUP_TITLES: Readonly<Record<CommandGroup, string>> = {
  gateway: 'The gateway:',
  accounts: "Owners, keys and endpoints, in the config's store (the SQLite file at storage.path, or a fleet's PostgreSQL):",
  stores: 'Moving data between stores:',
  other: 'Other:',
};

const CONFIG: OptionSpec = {
  name: 'config',
  value: 'FILE',
  required: true,
  text: 'the config file (a relative storage.path is read from its folder)',
};
const STORE_CONFIG: OptionSpec = {
  ...CONFIG,
  text: "the config file, of which this command reads only storage, plans and the chains' names",
};
const ENV_FILE: OptionSpec = {
  name: 'env-file',
  value: 'FILE',
  text: `a systemd EnvironmentFile (KEY=VALUE lines) for the config's \${NAME} references; its variables win`,
};
const JSON_OUT: OptionSpec = { name: 'json', text: 'print JSON (times in ISO 8601, as the management API) instead of text' };
const JSON_LIST: OptionSpec = { name: 'json', text: 'print a JSON array (times in ISO 8601, as the management API) instead of a table' };

/** An operator command on the store: its options, then --config and --env-file. */
const onStore = (...options: OptionSpec[]): OptionSpec[] => [...options, STORE_CONFIG, ENV_FILE];

const STORE_EXIT = '0 done; 1 refused (an unknown owner or endpoint, a limit) or the store failed; 2 bad arguments';

/** A flag of `endpoint set` and the field of the endpoint's restrictions it writes. */
export interface SettingOption extends OptionSpec {
  readonly field: keyof FenceSettings;
}

/** The flags of `endpoint set`, each one field of the endpoint's restrictions (cli/endpoint-commands.ts reads them). */
export const SETTING_OPTIONS: readonly SettingOption[] = [
  {
    name: 'allowed-origins',
    field: 'allowed_origins',
    value: 'LIST',
    list: true,
    text: "browsers' Origin that may use the key: https://app.example.com,*.example.com",
  },
  {
    name: 'allow-no-origin',
    field: 'allow_no_origin',
    value: 'true|false',
    text: 'with allowed origins, also accept requests without Origin (servers)',
  },
  {
    name: 'allowed-ips',
    field: 'allowed_ips',
    value: 'LIST',
    list: true,
    text: 'client addresses and CIDR ranges: 192.0.2.0/24,2001:db8::1',
  },
  {
    name: 'allowed-methods',
    field: 'allowed_methods',
    value: 'LIST',
    list: true,
    text: "method patterns, narrower than the plan's: eth_call,eth_get*",
  },
  { name: 'allowed-contracts', field: 'allowed_contracts', value: 'LIST', list: true, text: 'contract addresses calls may name' },
  { name: 'key-in-path', field: 'key_in_path', value: 'true|false', text: 'false: the key only in X-API-Key or Authorization: Bearer' },
  {
    name: 'jwt-key',
    field: 'jwt_keys',
    value: 'id:alg:FILE',
    list: true,
    text: 'public keys (FILE a PEM or a JWK; alg ES256, RS256 or EdDSA) a Bearer token must be signed by',
  },
  { name: 'jwt-max-lifetime', field: 'jwt_max_lifetime_s', value: 'D', text: 'the longest a token may live (default 1h)' },
];

const NAME_RULE = `NAME is 1 to ${MAX_NAME_LENGTH} characters (trimmed), no control characters.`;
const RU_RULE = `N is RU in decimal digits, at most ${MAX_RU} (a balance too).`;

export const COMMANDS: readonly CommandSpec[] = [
  {
    words: 'serve',
    args: [],
    options: [CONFIG, ENV_FILE],
    summary: 'run the gateway (what the systemd unit runs); the only command that creates the database',
    details: 'It checks the config as check-config does first. SIGHUP reloads the config; SIGTERM or SIGINT stops it.',
    exit: '0 stopped by a signal; 1 an invalid config or a failed start; 2 bad arguments',
    group: 'gateway',
  },
  {
    words: 'check-config',
    args: [],
    options: [CONFIG, ENV_FILE],
    summary: 'validate a config file and what it names (TLS files, storage, plans in use)',
    exit: '0 valid; 1 invalid, with every error and its key path; 2 bad arguments',
    group: 'gateway',
  },
  {
    words: 'status',
    args: [],
    options: [{ name: 'json', text: "print the daemon's report as JSON (GET /status)" }, CONFIG, ENV_FILE],
    summary: 'ask the running daemon (its metrics listener) how each chain and upstream is doing',
    exit: '0 every chain has a node in rotation; 1 a chain has none; 2 bad arguments, or the daemon or config unreadable',
    group: 'gateway',
  },
  {
    words: 'upstream cordon',
    args: ['CHAIN', 'NODE'],
    options: [CONFIG, ENV_FILE],
    summary: 'take upstream NODE of CHAIN out of rotation for maintenance, without a reload',
    details: 'It asks the running daemon through its metrics listener, as status does.',
    exit: '0 done (or already so); 1 the daemon refused (an unknown chain or node); 2 bad arguments, or the daemon unreachable',
    group: 'gateway',
  },
  {
    words: 'upstream uncordon',
    args: ['CHAIN', 'NODE'],
    options: [CONFIG, ENV_FILE],
    summary: 'put a cordoned upstream back into rotation (when healthy)',
    exit: '0 done (or already so); 1 the daemon refused (an unknown chain or node); 2 bad arguments, or the daemon unreachable',
    group: 'gateway',
  },
  {
    words: 'devnet',
    args: [],
    options: [{ name: 'port', value: 'N', text: 'the port the gateway listens on (default 8080; 0: any free one)' }],
    summary: 'run a local anvil devnet and a beacon node with the gateway in front (npm start)',
    exit: '0 stopped by Ctrl-C or SIGTERM; 1 it could not start (a taken port, no anvil); 2 bad arguments',
    group: 'gateway',
  },
  {
    words: 'owner create',
    args: [],
    options: onStore(
      { name: 'name', value: 'NAME', required: true, text: "the owner's name" },
      { name: 'plan', value: 'PLAN', required: true, text: "a plan of the config's plans section" },
      { name: 'ru', value: 'N', required: true, text: 'its first credit, in RU (0 allowed)' },
      JSON_OUT,
    ),
    summary: 'a new owner and its first management key (shown once)',
    details: `${NAME_RULE} ${RU_RULE}`,
    exit: STORE_EXIT,
    group: 'accounts',
  },
  {
    words: 'owner list',
    args: [],
    options: onStore(JSON_LIST),
    summary: 'owners, balances, states and endpoint counts',
    exit: STORE_EXIT,
    group: 'accounts',
  },
  {
    words: 'owner topup',
    args: ['ID'],
    options: onStore({ name: 'ru', value: 'N', required: true, text: 'the RU to credit (1 or more)' }),
    summary: 'credit N RU to owner ID',
    details: RU_RULE,
    exit: STORE_EXIT,
    group: 'accounts',
  },
  {
    words: 'owner set-plan',
    args: ['ID', 'PLAN'],
    options: onStore(),
    summary: "move owner ID to PLAN (a plan of the config's plans section)",
    exit: STORE_EXIT,
    group: 'accounts',
  },
  {
    words: 'owner suspend',
    args: ['ID'],
    options: onStore(),
    summary: "refuse the owner's API and management keys (403 owner_suspended)",
    exit: STORE_EXIT,
    group: 'accounts',
  },
  {
    words: 'owner resume',
    args: ['ID'],
    options: onStore(),
    summary: "accept a suspended owner's keys again",
    exit: STORE_EXIT,
    group: 'accounts',
  },
  {
    words: 'owner delete',
    args: ['ID'],
    options: onStore(),
    summary: 'the owner, its endpoints and its keys',
    exit: STORE_EXIT,
    group: 'accounts',
  },
  {
    words: 'owner key create',
    args: ['ID'],
    options: onStore(
      {
        name: 'role',
        value: 'ROLE',
        text: 'admin (the default: everything), developer (endpoints and usage) or viewer (read only)',
      },
      JSON_OUT,
    ),
    summary: 'another management key for owner ID (shown once), with its role',
    exit: STORE_EXIT,
    group: 'accounts',
  },
  {
    words: 'owner key list',
    args: ['ID'],
    options: onStore(JSON_LIST),
    summary: "owner ID's management keys, by prefix (never the keys)",
    exit: STORE_EXIT,
    group: 'accounts',
  },
  {
    words: 'owner key revoke',
    args: ['ID', 'PREFIX'],
    options: onStore(),
    summary: 'revoke the management key starting with PREFIX (its first 8 characters)',
    exit: STORE_EXIT,
    group: 'accounts',
  },
  {
    words: 'endpoint create',
    args: [],
    options: onStore(
      { name: 'owner', value: 'ID', required: true, text: 'the owner it is made for' },
      { name: 'name', value: 'NAME', required: true, text: "the endpoint's name" },
      { name: 'chain', value: 'SLUG', text: "the chain it serves, a key of the config's chains (default: the only one)" },
      JSON_OUT,
    ),
    summary: 'a new endpoint for an owner and its API key (shown once), as the management API makes one',
    details:
      `${NAME_RULE} The owner's plan limits its endpoints (plans.<plan>.max_endpoints), as for the ` +
      'management API. Its restrictions are set afterwards with endpoint set.',
    exit: "0 created; 1 refused (an unknown or suspended owner, the plan's endpoint limit reached) or the store failed; 2 bad arguments",
    group: 'accounts',
  },
  {
    words: 'endpoint list',
    args: [],
    options: onStore({ name: 'owner', value: 'ID', text: "only this owner's endpoints" }, JSON_LIST),
    summary: 'endpoints (never their keys)',
    exit: STORE_EXIT,
    group: 'accounts',
  },
  {
    words: 'endpoint set',
    args: ['ID'],
    options: onStore(...SETTING_OPTIONS, JSON_OUT),
    summary: "change an endpoint's restrictions, one flag per setting",
    details:
      "A value 'none' clears a setting (no restriction, or its default), a flag left out keeps its value, and " +
      'lists are comma-separated (or the flag repeated). D is whole seconds or a duration: 90s, 15m, 24h, 7d.',
    exit: STORE_EXIT,
    group: 'accounts',
  },
  {
    words: 'endpoint rotate',
    args: ['ID'],
    options: onStore(
      {
        name: 'grace',
        value: 'D',
        text: 'how long the old key keeps working: 90s, 15m, 24h, 7d (default 24h, at most 30d; 0: not at all)',
      },
      JSON_OUT,
    ),
    summary: 'a new API key for endpoint ID (shown once); the old one works for the grace',
    exit: STORE_EXIT,
    group: 'accounts',
  },
  {
    words: 'endpoint delete',
    args: ['ID'],
    options: onStore(),
    summary: 'delete endpoint ID: its key is refused and its open connections closed within a second',
    exit: STORE_EXIT,
    group: 'accounts',
  },
  {
    words: 'backup',
    args: [],
    options: onStore(
      { name: 'out', value: 'FILE', required: true, text: 'where the copy is written' },
      { name: 'force', text: 'overwrite FILE when it exists' },
    ),
    summary: 'an online copy of the SQLite file, safe while the daemon runs (not for storage.url: use pg_dump)',
    exit: '0 written; 1 refused (FILE exists, a PostgreSQL store) or failed; 2 bad arguments',
    group: 'stores',
  },
  {
    words: 'store copy',
    args: [],
    options: [
      { name: 'from', value: 'FILE', required: true, text: 'the SQLite database (storage.path)' },
      { name: 'to', value: 'URL', required: true, text: 'an empty PostgreSQL database (storage.url), postgres://...' },
    ],
    summary: "copy a single machine's SQLite data into an empty fleet PostgreSQL; stop the gateway first",
    exit: '0 copied and checked; 1 refused or failed (the target not empty, the source missing, the target unreachable; nothing is written then); 2 bad arguments',
    group: 'stores',
  },
  {
    words: 'version',
    args: [],
    options: [],
    summary: "print chaingate's version (also chaingate --version)",
    exit: '0',
    group: 'other',
  },
  {
    words: 'help',
    args: ['[COMMAND]'],
    options: [],
    summary: "print a command's usage (also chaingate COMMAND --help), or this overview",
    exit: '0; 2 an unknown command',
    group: 'other',
  },
];

/** The command named by its words, or undefined. */
export function commandNamed(words: string): CommandSpec | undefined {
  return COMMANDS.find((c) => c.words === words);
}
