import { describe, expect, it } from "vitest";
import { DEFAULT_PASSWORD_ITERATIONS, hashPassword, verifyPassword } from "../../../src/gateway/auth/password.ts";
import { PASSWORD_HASH_PATTERN } from "../../../src/config/gateway.ts";

describe("PBKDF2 password hashes", () => {
  it("writes pbkdf2-sha256$<iterations>$<salt>$<hash> with at least 210000 iterations by default, and verifies it", async () => {
    const stored = await hashPassword("correct horse battery staple");
    expect(stored).toMatch(PASSWORD_HASH_PATTERN);
    const iterations = Number(stored.split("$")[1]);
    expect(iterations).toBe(DEFAULT_PASSWORD_ITERATIONS);
    expect(iterations).toBeGreaterThanOrEqual(210_000);
    expect(await verifyPassword("correct horse battery staple", stored)).toBe(true);
    expect(await verifyPassword("correct horse battery stapl", stored)).toBe(false);
  });

  it("salts every hash, so one password never hashes the same twice", async () => {
    const a = await hashPassword("pw", { iterations: 1000 });
    const b = await hashPassword("pw", { iterations: 1000 });
    expect(a).not.toBe(b);
    expect(await verifyPassword("pw", a)).toBe(true);
    expect(await verifyPassword("pw", b)).toBe(true);
  });

  it("treats composed and decomposed Unicode as the same password", async () => {
    const stored = await hashPassword("caf\u00e9", { iterations: 1000 });
    expect(await verifyPassword("cafe\u0301", stored)).toBe(true);
  });

  it("never matches a malformed or weakened hash", async () => {
    const good = await hashPassword("pw", { iterations: 1000 });
    const [, , salt, hash] = good.split("$");
    for (const stored of ["", "pw", `pbkdf2-sha1$1000$${salt}$${hash}`, `pbkdf2-sha256$10$${salt}$${hash}`, `pbkdf2-sha256$1000$${salt}`, `pbkdf2-sha256$1000$${salt}$AAAA`]) {
      expect(await verifyPassword("pw", stored), stored).toBe(false);
    }
  });

  it("refuses an empty password and an iteration count outside the safe range", async () => {
    await expect(hashPassword("")).rejects.toMatchObject({ code: "invalid_password" });
    await expect(hashPassword("pw", { iterations: 10 })).rejects.toMatchObject({ code: "invalid_password_iterations" });
  });
});
