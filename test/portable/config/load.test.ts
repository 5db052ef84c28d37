import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig, parseConfigText, validateConfig } from "../../../src/config/index.ts";

const FILE = "config.yaml";

/** Parses and returns the ConfigError the text must produce. */
function failure(text: string): ConfigError {
  try {
    parseConfigText(text, FILE);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error(`expected ${JSON.stringify(text)} to be rejected`);
}

function yaml(...lines: string[]): string {
  return `${lines.join("\n")}\n`;
}

describe("defaults", () => {
  const defaults = {
    models: [],
    sandbox: { use: "virtual", command_timeout_ms: 30000, max_workers: 8 },
    storage: { driver: "fs", base: ".deer-flow" },
    agent: { recursion_limit: 100 },
  };

  it("gives every default for an empty file, a comment-only file and empty sections", () => {
    expect(parseConfigText("", FILE)).toEqual(defaults);
    expect(parseConfigText("# nothing configured yet\n", FILE)).toEqual(defaults);
    expect(parseConfigText(yaml("models:", "sandbox:", "storage:", "agent:"), FILE)).toEqual(defaults);
  });

  it("fills model defaults and keeps what is given", () => {
    const config = parseConfigText(
      yaml(
        "default_model: gpt",
        "models:",
        "  - name: gpt",
        "    use: openai-compatible",
        "    model: gpt-4o-mini",
        "    api_key_env: OPENAI_API_KEY",
        "    temperature: 0.2",
        "    extra_headers: { X-Title: deerflow-edge }",
        "  - name: local",
        "    use: openai-compatible",
        "    model: qwen2.5",
        "    base_url: http://127.0.0.1:11434/v1",
        "    timeout_ms: 5000",
        "sandbox: { use: local, command_timeout_ms: 5000 }",
        "storage: { driver: memory }",
        "agent: { system_prompt: Be brief., recursion_limit: 25 }",
      ),
      FILE,
    );
    expect(config.models[0]).toEqual({
      name: "gpt",
      use: "openai-compatible",
      model: "gpt-4o-mini",
      base_url: "https://api.openai.com/v1",
      api_key_env: "OPENAI_API_KEY",
      temperature: 0.2,
      timeout_ms: 120000,
      extra_headers: { "X-Title": "deerflow-edge" },
    });
    expect(config.models[1]).toMatchObject({ base_url: "http://127.0.0.1:11434/v1", timeout_ms: 5000 });
    expect(config.sandbox).toEqual({ use: "local", command_timeout_ms: 5000, max_workers: 8 });
    expect(config.storage).toEqual({ driver: "memory", base: ".deer-flow" });
    expect(config.agent).toEqual({ system_prompt: "Be brief.", recursion_limit: 25 });
    expect(config.default_model).toBe("gpt");
  });

  it("accepts JSON text, since JSON is YAML", () => {
    expect(parseConfigText('{"models": [{"name": "offline", "use": "demo"}]}', FILE).models).toEqual([
      { name: "offline", use: "demo", base_url: "https://api.openai.com/v1", timeout_ms: 120000 },
    ]);
  });

  it("lets default_model name the built-in demo model without listing it", () => {
    expect(parseConfigText("default_model: demo\n", FILE).default_model).toBe("demo");
  });
});

describe("not YAML", () => {
  it("names the file, line and column", () => {
    const error = failure(yaml("models:", "  - name: a", "    use: demo", "   bad: [1, 2"));
    expect(error.code).toBe("config_not_yaml");
    expect(error.message).toBe(
      "config.yaml: not valid YAML (line 4, column 1): Sequence item without - indicator",
    );
  });

  it("reports duplicate keys as YAML errors", () => {
    const error = failure(yaml("sandbox:", "  use: local", "sandbox:", "  use: virtual"));
    expect(error.code).toBe("config_not_yaml");
    expect(error.message).toBe("config.yaml: not valid YAML (line 3, column 1): Map keys must be unique");
  });

  it("reports tabs used as indentation", () => {
    expect(failure("models:\n\t- name: x\n").message).toBe(
      "config.yaml: not valid YAML (line 2, column 1): Tabs are not allowed as indentation",
    );
  });

  it("keeps the message to one line", () => {
    expect(failure("a: b: c\n").message).not.toContain("\n");
  });
});

describe("wrong values", () => {
  it("names the key path and the allowed values", () => {
    const error = failure(yaml("models:", "  - name: a", "    use: gpt"));
    expect(error.code).toBe("config_invalid");
    expect(error.message).toBe('config.yaml: models[0].use: expected "openai-compatible" | "demo" | "replay", got "gpt"');
    expect(error.issues).toEqual([{ path: "models[0].use", message: 'expected "openai-compatible" | "demo" | "replay", got "gpt"' }]);
  });

  it("reports a wrong type with the index of the model", () => {
    const error = failure(
      yaml(
        "models:",
        "  - { name: a, use: demo }",
        "  - { name: b, use: demo }",
        "  - { name: c, use: openai-compatible, model: m, api_key_env: 42 }",
      ),
    );
    expect(error.message).toBe("config.yaml: models[2].api_key_env: expected string, got 42");
  });

  it("reports lists and mappings in the wrong place", () => {
    expect(failure("- models\n").message).toBe(
      "config.yaml: expected a mapping of top-level sections (models, default_model, sandbox, storage, agent), got a list",
    );
    expect(failure("just a string\n").message).toBe(
      'config.yaml: expected a mapping of top-level sections (models, default_model, sandbox, storage, agent), got "just a string"',
    );
    expect(failure("models: { name: a }\n").message).toBe("config.yaml: models: expected a list, got a mapping");
    expect(failure("sandbox: [virtual]\n").message).toBe("config.yaml: sandbox: expected a mapping, got a list");
    expect(failure("models: [demo]\n").message).toBe('config.yaml: models[0]: expected a mapping, got "demo"');
  });

  it("reports a missing required key", () => {
    expect(failure(yaml("models:", "  - use: demo")).message).toBe(
      "config.yaml: models[0].name: required key is missing; expected string",
    );
    expect(failure(yaml("models:", "  - name: x")).message).toBe(
      'config.yaml: models[0].use: required key is missing; expected "openai-compatible" | "demo" | "replay"',
    );
  });

  it("explains each rule in words", () => {
    const cases: [string, string][] = [
      [
        yaml("models:", "  - { name: my model, use: demo }"),
        'models[0].name: expected a name made of letters, digits, "_", "." or "-", got "my model"',
      ],
      [
        yaml("models:", "  - { name: a, use: openai-compatible, model: m, base_url: ftp://example.com }"),
        'models[0].base_url: expected an http(s) URL such as https://api.openai.com/v1, got "ftp://example.com"',
      ],
      [
        yaml("models:", "  - { name: a, use: openai-compatible, model: m, api_key_env: my-key }"),
        'models[0].api_key_env: expected an environment variable name such as OPENAI_API_KEY, got "my-key"',
      ],
      [yaml("models:", "  - { name: a, use: demo, temperature: 3 }"), "models[0].temperature: expected a number from 0 to 2, got 3"],
      [yaml("models:", "  - { name: a, use: demo, timeout_ms: 0 }"), "models[0].timeout_ms: expected a number >= 1, got 0"],
      [yaml("models:", "  - { name: a, use: demo, max_tokens: 1.5 }"), "models[0].max_tokens: expected a whole number, got 1.5"],
      [yaml("models:", '  - { name: a, use: openai-compatible, model: "" }'), 'models[0].model: expected a non-empty string, got ""'],
      ["storage: { driver: s3 }\n", 'storage.driver: expected "memory" | "fs" | "deno-kv" | "postgres", got "s3"'],
      ["storage: { driver: postgres, url_env: database-url }\n", 'storage.url_env: expected an environment variable name such as DATABASE_URL, got "database-url"'],
      ["storage: { driver: postgres, url_env: DATABASE_URL, pool_max: 0 }\n", "storage.pool_max: expected a number >= 1, got 0"],
      ["storage: { driver: postgres, url_env: DATABASE_URL, lease_ms: 1.5 }\n", "storage.lease_ms: expected a whole number, got 1.5"],
      ["sandbox: { use: docker }\n", 'sandbox.use: expected "virtual" | "local", got "docker"'],
      ["sandbox: { command_timeout_ms: 0 }\n", "sandbox.command_timeout_ms: expected a number >= 1, got 0"],
      ["sandbox: { command_timeout_ms: 2.5 }\n", "sandbox.command_timeout_ms: expected a whole number, got 2.5"],
      ["sandbox: { command_timeout_ms: 2147483648 }\n", "sandbox.command_timeout_ms: expected a number <= 2147483647 (about 24.8 days), got 2147483648"],
      ["sandbox: { max_workers: 0 }\n", "sandbox.max_workers: expected a number >= 1, got 0"],
      ["sandbox: { max_workers: 257 }\n", "sandbox.max_workers: expected a number <= 256, got 257"],
      ["agent: { recursion_limit: -1 }\n", "agent.recursion_limit: expected a number >= 1, got -1"],
      ["default_model: 7\n", "default_model: expected string, got 7"],
    ];
    for (const [text, expected] of cases) expect(failure(text).message).toBe(`${FILE}: ${expected}`);
  });

  it("keys the path of a bad map entry by its name, quoting names that are not plain words", () => {
    const error = failure(yaml("models:", '  - { name: a, use: demo, extra_headers: { X-Title: 3, "a b": c } }'));
    expect(error.issues).toEqual([
      { path: "models[0].extra_headers.X-Title", message: "expected string, got 3" },
      { path: 'models[0].extra_headers["a b"]', message: 'expected an HTTP header name, got "a b"' },
    ]);
    expect(error.message).toBe("config.yaml: models[0].extra_headers.X-Title: expected string, got 3 (and 1 more problem)");
  });

  it("counts further problems in the one-line message and lists them all in issues", () => {
    const error = failure(yaml("storage: { driver: s3, base: '' }", "sandbox: { use: docker }"));
    expect(error.message).toBe('config.yaml: sandbox.use: expected "virtual" | "local", got "docker" (and 2 more problems)');
    expect(error.issues.map((issue) => issue.path)).toEqual(["sandbox.use", "storage.driver", "storage.base"]);
  });
});

describe("unknown keys", () => {
  it("fails at the top level with the allowed sections", () => {
    expect(failure("modles: []\n").message).toBe(
      "config.yaml: modles: unknown key; expected one of: models, default_model, sandbox, storage, agent",
    );
  });

  it("fails inside a section", () => {
    expect(failure("storage: { driver: fs, dir: /tmp }\n").message).toBe(
      "config.yaml: storage.dir: unknown key; expected one of: driver, base, path, url_env, lease_ms, lease_grace_ms, pool_max",
    );
    expect(failure("storage: { driver: fs, path: /tmp/deerflow.kv }\n").message).toBe(
      'config.yaml: storage.path: only read by driver "deno-kv"; remove it, or set driver: deno-kv',
    );
    expect(failure("agent: { recursion: 5 }\n").message).toBe(
      "config.yaml: agent.recursion: unknown key; expected one of: system_prompt, recursion_limit",
    );
  });

  it("fails inside a model entry, with the index", () => {
    const error = failure(yaml("models:", "  - { name: a, use: demo }", "  - { name: b, use: demo, api_kye_env: X }"));
    expect(error.message).toBe(
      "config.yaml: models[1].api_kye_env: unknown key; expected one of: name, use, model, base_url, api_key_env, display_name, description, max_tokens, temperature, timeout_ms, supports_vision, supports_thinking, extra_headers, context_window, fixture, recording, fixtures, recordings",
    );
  });

  it("rejects a literal api_key and points to api_key_env", () => {
    const error = failure(
      yaml("models:", "  - name: gpt", "    use: openai-compatible", "    model: gpt-4o-mini", "    api_key: sk-live-123"),
    );
    expect(error.code).toBe("config_invalid");
    expect(error.message).toBe(
      "config.yaml: models[0].api_key: API keys must not be written in config.yaml; put the key in an environment variable and set api_key_env to its name (e.g. api_key_env: OPENAI_API_KEY)",
    );
    expect(error.message).not.toContain("sk-live-123");
  });

  it("rejects credentials in extra_headers", () => {
    expect(failure(yaml("models:", "  - { name: a, use: demo, extra_headers: { Authorization: Bearer x } }")).message).toBe(
      'config.yaml: models[0].extra_headers.Authorization: header "Authorization" carries a secret and must not be written in the config file; put the key in an environment variable and name it with api_key_env',
    );
  });
});

describe("rules across keys", () => {
  it("storage.driver postgres: url_env required, the postgres keys refused for other drivers, each with its path", () => {
    expect(failure("storage: { driver: postgres }\n").message).toBe(
      'config.yaml: storage.url_env: driver "postgres" needs url_env, the environment variable that holds the connection URL, for example url_env: DATABASE_URL',
    );
    for (const key of ["url_env: DATABASE_URL", "lease_ms: 1000", "lease_grace_ms: 1000", "pool_max: 4"]) {
      const name = key.split(":")[0];
      expect(failure(`storage: { driver: fs, ${key} }\n`).message).toBe(`config.yaml: storage.${name}: only read by driver "postgres"; remove it, or set driver: postgres`);
    }
    const config = parseConfigText("storage: { driver: postgres, url_env: PG_URL, lease_ms: 5000, lease_grace_ms: 2000, pool_max: 4 }\n", FILE);
    expect(config.storage).toEqual({ driver: "postgres", base: ".deer-flow", url_env: "PG_URL", lease_ms: 5000, lease_grace_ms: 2000, pool_max: 4 });
  });

  it("names duplicate model names and where they were first used", () => {
    const error = failure(
      yaml("models:", "  - { name: fast, use: demo }", "  - { name: slow, use: demo }", "  - { name: fast, use: demo }"),
    );
    expect(error.code).toBe("config_invalid");
    expect(error.message).toBe(
      'config.yaml: models[2].name: duplicate model name "fast" (already used by models[0]); model names must be unique',
    );
  });

  it("requires a provider model id for openai-compatible", () => {
    expect(failure(yaml("models:", "  - { name: gpt, use: openai-compatible }")).message).toBe(
      `config.yaml: models[0].model: required when use is "openai-compatible"; set it to the provider's model id (e.g. gpt-4o-mini)`,
    );
  });

  it("reserves the name demo for the built-in demo model", () => {
    expect(failure(yaml("models:", "  - { name: demo, use: openai-compatible, model: m }")).message).toBe(
      'config.yaml: models[0].name: "demo" is reserved for the built-in demo model; choose another name',
    );
  });

  it("requires default_model to name a model, listing the names there are", () => {
    const error = failure(yaml("default_model: gpt-5", "models:", "  - { name: gpt, use: openai-compatible, model: m }"));
    expect(error.message).toBe(
      'config.yaml: default_model: "gpt-5" is not a configured model; expected one of: "gpt", "demo"',
    );
  });
});

describe("validateConfig and loadConfig", () => {
  it("validates a parsed value under the given file name", () => {
    expect(() => validateConfig({ sandbox: { use: "vm" } }, "extensions.json")).toThrow(
      'extensions.json: sandbox.use: expected "virtual" | "local", got "vm"',
    );
    expect(validateConfig({}, FILE).sandbox.use).toBe("virtual");
  });

  it("gives defaults for a missing optional file and fails for a required one", async () => {
    const readText = async () => undefined;
    expect((await loadConfig({ fileName: FILE, readText })).models).toEqual([]);
    const error = await loadConfig({ fileName: "prod.yaml", readText, optional: false }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    expect(error).toMatchObject({
      code: "config_not_found",
      message: "prod.yaml: file not found; create it or point to an existing config file",
    });
  });

  it("parses the text it reads", async () => {
    const config = await loadConfig({ fileName: FILE, readText: async () => "storage: { driver: memory }\n" });
    expect(config.storage.driver).toBe("memory");
  });
});
