/**
 * The run coordination tables (runs, frames, thread holds), applied as one migration by schema.ts.
 *
 * Ids and the created_at stamp use the "C" collation so the database orders them as the in-memory
 * store does (code points, not the locale's rules). `holding` is true from admission until the run
 * released its thread (queued, running or finalizing); `claimed` once a worker started it. The
 * partial unique index is what keeps two workers from running one thread at once: a second claim
 * fails with 23505 even if every check in the claim statement raced.
 */
export const RUNS_MIGRATION_SQL: readonly string[] = [
  `CREATE SEQUENCE deerflow_runs_seq`,
  `CREATE TABLE deerflow_runs (
    run_id text COLLATE "C" PRIMARY KEY,
    thread_id text COLLATE "C" NOT NULL,
    seq bigint NOT NULL DEFAULT nextval('deerflow_runs_seq'),
    status text NOT NULL,
    holding boolean NOT NULL DEFAULT true,
    claimed boolean NOT NULL DEFAULT false,
    "row" jsonb NOT NULL,
    owner_worker text,
    lease_expires_at timestamptz,
    cancel_action text CHECK (cancel_action IN ('interrupt', 'rollback')),
    cancel_requested_at timestamptz,
    created_at text COLLATE "C" NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
  )`,
  `ALTER SEQUENCE deerflow_runs_seq OWNED BY deerflow_runs.seq`,
  `CREATE UNIQUE INDEX deerflow_runs_one_claimed_per_thread ON deerflow_runs (thread_id) WHERE claimed AND holding`,
  `CREATE INDEX deerflow_runs_holding_by_thread ON deerflow_runs (thread_id, seq) WHERE holding`,
  `CREATE INDEX deerflow_runs_by_thread ON deerflow_runs (thread_id, created_at DESC, run_id DESC)`,
  `CREATE INDEX deerflow_runs_holding_lease ON deerflow_runs (lease_expires_at) WHERE holding`,
  `CREATE TABLE deerflow_thread_holds (
    thread_id text COLLATE "C" PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now()
  )`,
  `CREATE TABLE deerflow_run_frames (
    run_id text COLLATE "C" NOT NULL,
    seq integer NOT NULL,
    id text NOT NULL,
    event text NOT NULL,
    data text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, seq)
  )`,
  `CREATE TABLE deerflow_run_streams (
    run_id text COLLATE "C" PRIMARY KEY,
    next_seq integer NOT NULL DEFAULT 0,
    ended boolean NOT NULL DEFAULT false,
    release_at timestamptz
  )`,
  `CREATE INDEX deerflow_run_streams_release ON deerflow_run_streams (release_at) WHERE release_at IS NOT NULL`,
];
