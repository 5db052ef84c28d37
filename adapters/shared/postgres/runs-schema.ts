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

/**
 * Admission in one round trip (migration 4): the advisory lock, the delete-hold and holding checks,
 * the cancel of holding runs under interrupt or rollback, and the insert, where a transaction took
 * six statements and a checked-out connection. It is VOLATILE PL/pgSQL, so each statement after
 * the lock takes a fresh snapshot under READ COMMITTED and sees every admission committed before
 * the lock was granted (one statement of CTEs would read a snapshot taken before waiting for it).
 * Outcomes: 'held' (the thread is being deleted), 'busy' with the holding run (reject),
 * 'cancelled' once per run asked to stop, then 'admitted'.
 */
export const ADMIT_FUNCTION_SQL = `CREATE FUNCTION deerflow_admit(
    p_run_id text, p_thread_id text, p_row jsonb, p_worker text, p_lease_ms double precision, p_created_at text, p_strategy text)
  RETURNS TABLE (o_outcome text, o_run_id text, o_owner text, o_action text)
  LANGUAGE plpgsql VOLATILE AS $fn$
  DECLARE
    v_holding text;
  BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(p_thread_id, 0));
    IF EXISTS (SELECT 1 FROM deerflow_thread_holds h WHERE h.thread_id = p_thread_id) THEN
      RETURN QUERY SELECT 'held'::text, NULL::text, NULL::text, NULL::text;
      RETURN;
    END IF;
    SELECT r.run_id INTO v_holding FROM deerflow_runs r WHERE r.thread_id = p_thread_id AND r.holding ORDER BY r.seq LIMIT 1;
    IF v_holding IS NOT NULL AND p_strategy = 'reject' THEN
      RETURN QUERY SELECT 'busy'::text, v_holding, NULL::text, NULL::text;
      RETURN;
    END IF;
    IF v_holding IS NOT NULL AND p_strategy IN ('interrupt', 'rollback') THEN
      -- The first request wins, as an in-process abort does: a run already stopping keeps its action.
      RETURN QUERY UPDATE deerflow_runs r SET cancel_action = COALESCE(r.cancel_action, p_strategy),
          cancel_requested_at = COALESCE(r.cancel_requested_at, now())
        WHERE r.thread_id = p_thread_id AND r.holding
        RETURNING 'cancelled'::text, r.run_id, r.owner_worker, r.cancel_action;
    END IF;
    INSERT INTO deerflow_runs (run_id, thread_id, status, "row", owner_worker, lease_expires_at, created_at)
      VALUES (p_run_id, p_thread_id, 'pending', p_row, p_worker, now() + p_lease_ms * interval '1 ms', p_created_at);
    RETURN QUERY SELECT 'admitted'::text, p_run_id, NULL::text, NULL::text;
  END
  $fn$`;
