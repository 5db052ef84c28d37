/** Random identifiers from crypto.randomUUID (available on every supported runtime). */
export function newId(prefix?: string): string {
  const id = crypto.randomUUID();
  return prefix ? `${prefix}-${id}` : id;
}
