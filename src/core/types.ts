/*
 * A hand-written public type beside the schema it describes: JSR publishes no inferred type (its
 * "slow types"), so a config type a user sees is written out, and `SameType` makes tsc fail the
 * moment it and the schema's inference part ways.
 */

/** `true` when A and B are the same type (not merely assignable either way). */
export type SameType<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;

/** Compiles only for `true`: `type _ = Assert<SameType<Config, v.InferOutput<typeof Schema>>>`. */
export type Assert<T extends true> = T;
