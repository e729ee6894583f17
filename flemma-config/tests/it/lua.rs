//! Lua frontmatter (feature `lua`): `flemma.opt` assignments, list methods and operators, the
//! peer fixture's frontmatter, sandboxing, budgets and error lines.

use std::time::{Duration, Instant};

use flemma_config::{Config, ConfigError, FrontmatterError, Layer, OpKind};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::{chain, names, strings};

const FIRST_LINE: u32 = 2;

fn apply(code: &str) -> Result<Config, FrontmatterError> {
    let mut config = Config::new();
    config.apply_frontmatter("lua", code, FIRST_LINE)?;
    Ok(config)
}

const STANDARD: [&str; 7] = ["read", "write", "edit", "find", "grep", "ls", "flemma.*"];

fn standard_and(extra: &[&str]) -> Vec<String> {
    let mut items = strings(&STANDARD);
    items.extend(strings(extra));
    items
}

#[test]
fn append_method_on_auto_approve() {
    let config = apply("flemma.opt.tools.auto_approve:append(\"bash\")").unwrap();
    let list = config.list("tools.auto_approve");
    assert_eq!(list.items, standard_and(&["bash"]));
    assert_eq!(list.source, "D+F");
    assert!(config.layer_has_op(
        Layer::Frontmatter,
        OpKind::Append,
        "tools.auto_approve",
        Some("bash")
    ));
    assert!(!config.layer_has_set(Layer::Frontmatter, "tools.auto_approve"));
}

#[test]
fn assigning_a_list_sets_it() {
    let config = apply("flemma.opt.tools = {\"bash\", \"read\"}").unwrap();
    let list = config.list("tools");
    assert_eq!(list.items, strings(&["bash", "read"]));
    assert_eq!(list.source, "F");
    assert!(config.layer_has_set(Layer::Frontmatter, "tools"));

    let config = apply("flemma.opt.tools = {}").unwrap();
    let options = config.options().unwrap();
    assert!(options.tools.list.is_empty());
    assert!(options.tools.list_is_explicit);

    // Operators inside an assigned list are list operations too.
    let config =
        apply("flemma.opt.tools.auto_approve = {\"$readonly\", \"!grep\", \"+bash\"}").unwrap();
    assert_eq!(
        config.list("tools.auto_approve").items,
        strings(&["read", "find", "ls", "bash"])
    );
}

#[test]
fn remove_and_prepend_methods() {
    let config = apply(
        "flemma.opt.tools.auto_approve:remove(\"write\")\nflemma.opt.tools.auto_approve:prepend(\"bash\")",
    )
    .unwrap();
    assert_eq!(
        config.list("tools.auto_approve").items,
        strings(&["bash", "read", "edit", "find", "grep", "ls", "flemma.*"])
    );
    assert!(config.layer_has_op(
        Layer::Frontmatter,
        OpKind::Remove,
        "tools.auto_approve",
        Some("write")
    ));
    assert!(config.layer_has_op(
        Layer::Frontmatter,
        OpKind::Prepend,
        "tools.auto_approve",
        Some("bash")
    ));

    // Methods take a list of strings too.
    let config =
        apply("flemma.opt.tools.auto_approve:remove({\"read\", \"write\", \"edit\"})").unwrap();
    assert_eq!(
        config.list("tools.auto_approve").items,
        strings(&["find", "grep", "ls", "flemma.*"])
    );
}

#[test]
fn operators_append_remove_and_prepend() {
    let mut config = Config::new();
    config
        .set(Layer::Setup, "tools", json!(["read", "grep"]))
        .unwrap();
    config
        .apply_frontmatter(
            "lua",
            "flemma.opt.tools = flemma.opt.tools + \"bash\"\n\
             flemma.opt.tools = flemma.opt.tools - \"grep\"\n\
             flemma.opt.tools = flemma.opt.tools ^ \"edit\"",
            FIRST_LINE,
        )
        .unwrap();
    let list = config.list("tools");
    assert_eq!(list.items, strings(&["edit", "read", "bash"]));
    assert_eq!(list.source, "S+F");
    assert!(!config.layer_has_set(Layer::Frontmatter, "tools"));
    assert!(config.layer_has_op(Layer::Frontmatter, OpKind::Remove, "tools", Some("grep")));

    // Chained, on auto_approve.
    let config = apply(
        "flemma.opt.tools.auto_approve = flemma.opt.tools.auto_approve - \"write\" + \"bash\"",
    )
    .unwrap();
    assert_eq!(
        config.list("tools.auto_approve").items,
        strings(&["read", "edit", "find", "grep", "ls", "flemma.*", "bash"])
    );
    assert!(!config.layer_has_set(Layer::Frontmatter, "tools.auto_approve"));
}

#[test]
fn scalar_assignments() {
    let config = apply(
        "flemma.opt.tools.max_concurrent = 4\n\
         flemma.opt.thinking = \"medium\"\n\
         flemma.opt.sandbox = false\n\
         flemma.opt.tools.autopilot = { enabled = false, max_turns = 5 }\n\
         flemma.opt.tools.bash.env = { FOO = \"bar\" }\n\
         flemma.opt.temperature = 0.5",
    )
    .unwrap();
    // `sandbox = false` widens: not taken unless the host lets frontmatters widen.
    assert!(config.options().unwrap().sandbox.enabled);
    let mut config = config;
    config.allow_frontmatter_widening(true);
    let options = config.options().unwrap();
    assert_eq!(options.tools.max_concurrent, 4);
    assert_eq!(options.thinking, Some(json!("medium")));
    assert!(!options.sandbox.enabled);
    assert!(!options.tools.autopilot.enabled);
    assert_eq!(options.tools.autopilot.max_turns, 5);
    assert_eq!(options.tools.bash.env["FOO"], "bar");
    assert_eq!(options.temperature, Some(0.5));
    assert!(config.layer_has_set(Layer::Frontmatter, "tools.max_concurrent"));
}

fn fixture_frontmatter() -> String {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/fixtures/peer/conversation_truncated_background_jobs.chat"
    ))
    .unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("```lua"));
    lines
        .take_while(|l| *l != "```")
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_peer_fixture_frontmatter() {
    let code = fixture_frontmatter();
    let mut config = Config::new();
    for name in ["bash", "read", "write", "edit", "grep", "find", "ls"] {
        config.append(Layer::Defaults, "tools", name).unwrap();
    }
    let registered = names(&[
        "bash",
        "read",
        "write",
        "edit",
        "grep",
        "find",
        "ls",
        "calculator_async",
    ]);
    config.apply_frontmatter("lua", &code, FIRST_LINE).unwrap();
    let options = config.options_with_tools(&registered).unwrap();
    assert!(options.tools.list.contains(&"calculator_async".to_owned()));
    assert!(options.tools.list.contains(&"bash".to_owned()));
    assert!(options.tools.list_is_explicit);
    assert!(
        options
            .tools
            .auto_approve
            .contains(&"calculator_async".to_owned())
    );
    assert_eq!(
        options.tools.auto_approve,
        standard_and(&["calculator_async"])
    );
    assert_eq!(options.tools.max_concurrent, 4);
    assert!(config.finalize(&registered).is_empty());
}

#[test]
fn the_sandbox_has_no_os_io_require_or_load() {
    for code in [
        "os.execute(\"touch /tmp/flemma-pwned\")",
        "io.open(\"/etc/passwd\")",
        "require(\"os\")",
        "load(\"return 1\")()",
        "dofile(\"/etc/passwd\")",
        "loadfile(\"/etc/passwd\")",
        "package.loadlib(\"x\", \"y\")",
        "debug.getinfo(1)",
    ] {
        let err = apply(code).unwrap_err();
        assert_eq!(err.line, FIRST_LINE, "{code}: {err}");
        assert!(!err.message.is_empty(), "{code}");
    }
    // The safe libraries are there.
    let config = apply(
        "local n = math.max(2, 3) + #string.rep(\"x\", 1)\n\
         local t = {}\n\
         table.insert(t, \"bash\")\n\
         flemma.opt.tools.max_concurrent = n\n\
         flemma.opt.tools = t",
    )
    .unwrap();
    assert_eq!(config.options().unwrap().tools.max_concurrent, 4);
    assert_eq!(config.list("tools").items, strings(&["bash"]));
}

#[test]
fn an_infinite_loop_stops_with_an_error() {
    let started = Instant::now();
    let mut config = Config::new();
    let err = config
        .apply_frontmatter(
            "lua",
            "flemma.opt.tools.max_concurrent = 4\nwhile true do end",
            FIRST_LINE,
        )
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(chain(&err).contains("too long"), "{err}");
    assert_eq!(err.line, 3, "{err}");
    assert_eq!(config.options().unwrap().tools.max_concurrent, 2);
}

#[test]
fn runaway_memory_stops_with_an_error() {
    let err =
        apply("local t = {}\nfor i = 1, 1e9 do t[i] = string.rep(\"x\", 1024) end").unwrap_err();
    // The 16 MiB limit stops the script (an unbounded one would take 1 TB); a memory error
    // carries no line, so the error points at the frontmatter's first line.
    assert_eq!(
        (err.line, err.message.as_str()),
        (FIRST_LINE, "memory error: not enough memory")
    );
}

#[test]
fn a_runtime_error_reports_the_transcript_line() {
    let mut config = Config::new();
    let err = config
        .apply_frontmatter(
            "lua",
            "flemma.opt.tools.max_concurrent = 4\nlocal x = 1\nerror(\"boom\")",
            10,
        )
        .unwrap_err();
    assert_eq!(err.line, 12, "{err}");
    assert!(chain(&err).contains("boom"), "{err}");
    // Nothing of the frontmatter was applied.
    assert_eq!(config.options().unwrap().tools.max_concurrent, 2);

    let err = apply("local x = nil\n\nlocal y = x.field").unwrap_err();
    assert_eq!(err.line, FIRST_LINE + 2, "{err}");

    let err = apply("flemma.opt.tools = (").unwrap_err();
    assert_eq!(err.line, FIRST_LINE, "{err}");
}

#[test]
fn an_unknown_option_reports_the_line_of_the_statement() {
    let mut config = Config::new();
    let err = config
        .apply_frontmatter(
            "lua",
            "flemma.opt.tools.max_concurrent = 4\n\n-- comment\nflemma.opt.tools.max_concurent = 5",
            FIRST_LINE,
        )
        .unwrap_err();
    // The message is the context; the option error, typed, is the cause.
    assert_eq!(
        (err.line, chain(&err)),
        (
            5,
            "line 5: invalid option: unknown option `tools.max_concurent` -- did you mean `tools.max_concurrent`?"
                .to_owned()
        )
    );
    assert!(
        matches!(
            std::error::Error::source(&err).and_then(|e| e.downcast_ref::<ConfigError>()),
            Some(ConfigError::UnknownOption { path, .. }) if path == "tools.max_concurent"
        ),
        "{err:?}"
    );
    assert_eq!(config.options().unwrap().tools.max_concurrent, 2);

    let err = apply("flemma.opt.tools.auto_approve:append(\"bash\")\nflemma.opt.tools.auto_aprove:append(\"x\")")
        .unwrap_err();
    assert_eq!(err.line, 3, "{err}");
    assert!(chain(&err).contains("tools.auto_aprove"), "{err}");

    let err =
        apply("flemma.opt.tools.max_concurrent = 4\nflemma.opt.tools.max_concurrent:append(\"x\")")
            .unwrap_err();
    assert_eq!(err.line, 3, "{err}");
    assert!(chain(&err).contains("is not a list"), "{err}");

    let err = apply("\nflemma.opt.tools.max_concurrent = \"four\"").unwrap_err();
    assert_eq!(err.line, 3, "{err}");
    assert!(
        chain(&err).contains("expects a non-negative integer"),
        "{err}"
    );

    let err = apply("flemma.opt.tools = {\"read\", \"!+bash\"}").unwrap_err();
    assert_eq!(err.line, FIRST_LINE, "{err}");
    assert!(chain(&err).contains("\"!+bash\""), "{err}");
}

#[test]
fn a_bad_method_argument_reports_the_cause_and_line() {
    let err = apply("\nflemma.opt.tools:append(42)").unwrap_err();
    assert_eq!(err.line, 3, "{err}");
    assert!(
        chain(&err).contains("list operations take a string or a list of strings"),
        "{err}"
    );
    // Only `tools.auto_approve` takes a function (see `lua_policy`).
    let err = apply("flemma.opt.thinking = function() end").unwrap_err();
    assert_eq!(
        (err.line, chain(&err)),
        (
            FIRST_LINE,
            "line 2: invalid option: option `thinking` expects a string, number, boolean or \
             table, got a function"
                .to_owned()
        )
    );
    let err = apply("flemma.opt.tools.auto_approve = {\"read\", function() end}").unwrap_err();
    assert!(chain(&err).contains("not a function"), "{err}");
}

#[test]
fn re_applying_clears_the_previous_frontmatter() {
    let mut config = Config::new();
    config
        .apply_frontmatter("lua", "flemma.opt.tools.max_concurrent = 4", FIRST_LINE)
        .unwrap();
    config
        .apply_frontmatter("lua", "flemma.opt.thinking = \"low\"", FIRST_LINE)
        .unwrap();
    let options = config.options().unwrap();
    assert_eq!(options.tools.max_concurrent, 2);
    assert_eq!(options.thinking, Some(json!("low")));
}

#[test]
fn globals_defined_by_the_script_are_template_variables() {
    let mut config = Config::new();
    let variables = config
        .apply_frontmatter(
            "lua",
            "recipient = \"Ada\"\n\
             local hidden = 1\n\
             limits = { turns = 3, names = {\"a\", \"b\"} }\n\
             helper = function() end\n\
             flemma.opt.tools.max_concurrent = 4",
            FIRST_LINE,
        )
        .unwrap();
    assert_eq!(
        serde_json::Value::Object(variables),
        json!({"recipient": "Ada", "limits": {"turns": 3, "names": ["a", "b"]}})
    );
    assert_eq!(config.options().unwrap().tools.max_concurrent, 4);
}

#[test]
fn integral_floats_are_integers() {
    let config =
        apply("flemma.opt.tools.max_concurrent = 8 / 2\nflemma.opt.temperature = 1.0").unwrap();
    let options = config.options().unwrap();
    assert_eq!(options.tools.max_concurrent, 4);
    assert_eq!(options.temperature, Some(1.0));
    let err = apply("flemma.opt.tools.max_concurrent = 2.5").unwrap_err();
    assert!(
        chain(&err).contains("expects a non-negative integer, got 2.5"),
        "{err}"
    );
}

#[test]
fn provider_specific_parameters_from_the_seed_document() {
    let mut config = flemma_config::Config::new();
    let code = "flemma.opt.thinking = \"low\"\nflemma.opt.anthropic.thinking_budget = 20000\nflemma.opt.openai.reasoning = \"high\"\nflemma.opt.vertex.thinking_budget = 4096\nflemma.opt.cache_retention = \"long\"\nflemma.opt.max_tokens = 8000\nflemma.opt.temperature = 0.3";
    config.apply_frontmatter("lua", code, 2).unwrap();
    let options = config.options().unwrap();
    assert_eq!(options.thinking, Some(serde_json::json!("low")));
    assert_eq!(options.anthropic["thinking_budget"], 20000);
    assert_eq!(options.openai["reasoning"], "high");
    assert_eq!(options.vertex["thinking_budget"], 4096);
    assert_eq!(
        (
            options.max_tokens,
            options.temperature,
            options.cache_retention.as_deref()
        ),
        (Some(8000), Some(0.3), Some("long"))
    );
}

/// Issue 34: adding a hook with `:append` is an error where the host does not let
/// frontmatters add hooks, and adds it where it does; a table of options is no list (it was
/// read as an empty one and the write dropped without a word).
#[test]
fn appended_hooks_are_taken_or_refused_never_dropped() {
    let code = "flemma.opt.hooks.PreToolUse:append({command = \"touch /tmp/x\"})";
    let refused = apply(code).unwrap_err();
    assert!(
        format!("{refused:?}").contains("cannot add hooks"),
        "{refused:?}"
    );
    let mut allowed = Config::new();
    allowed.allow_frontmatter_hooks(true);
    allowed.apply_frontmatter("lua", code, FIRST_LINE).unwrap();
    assert_eq!(
        allowed.frontmatter_hooks(),
        Some(&json!({"PreToolUse": [{"command": "touch /tmp/x"}]}))
    );
    let error = apply("flemma.opt.tools.auto_approve:append({name = \"bash\"})").unwrap_err();
    assert!(error.message.contains("got a table with keys"), "{error:?}");
}
