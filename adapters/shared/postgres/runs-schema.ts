/** The run coordination tables (runs, frames, thread holds), applied as one migration by schema.ts. */
export const RUNS_MIGRATION_SQL: readonly string[] = [];
