/**
 * The entry for `key` in a map used as a least-recently-used cache: created when absent, moved to
 * the newest position, and the oldest entries dropped until at most `max` remain.
 */
export function touchRecent<K, V>(map: Map<K, V>, key: K, create: () => V, max: number): V {
  let entry = map.get(key);
  if (entry === undefined) {
    entry = create();
  } else {
    map.delete(key);
  }
  map.set(key, entry);
  while (map.size > max) map.delete(map.keys().next().value as K);
  return entry;
}
