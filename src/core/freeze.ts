/** A deep, frozen copy of plain data, so a caller's context can be read but never written. */
export function deepFrozenCopy<T>(value: T): Readonly<T> {
  return deepFreeze(copyPlain(value, new WeakMap()));
}

function copyPlain<T>(value: T, seen: WeakMap<object, unknown>): T {
  if (value === null || typeof value !== "object") return value;
  const existing = seen.get(value as object);
  if (existing !== undefined) return existing as T;
  if (Array.isArray(value)) {
    const out: unknown[] = [];
    seen.set(value, out);
    for (const item of value) out.push(copyPlain(item, seen));
    return out as T;
  }
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return value; // class instances are shared as-is, then frozen
  const out: Record<string, unknown> = {};
  seen.set(value as object, out);
  for (const [key, item] of Object.entries(value as Record<string, unknown>)) out[key] = copyPlain(item, seen);
  return out as T;
}

function deepFreeze<T>(value: T): Readonly<T> {
  if (value === null || typeof value !== "object" || Object.isFrozen(value)) return value;
  const proto = Object.getPrototypeOf(value);
  if (!Array.isArray(value) && proto !== Object.prototype && proto !== null) return value;
  Object.freeze(value);
  for (const item of Object.values(value as Record<string, unknown>)) deepFreeze(item);
  return value;
}
