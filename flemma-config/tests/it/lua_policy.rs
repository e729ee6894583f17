//! Lua frontmatter policies (feature `lua`): a function as `tools.auto_approve` (seed
//! "Configuring approval", "Per-buffer approval"; spec §6.3), the `:set` method (spec §6.4's
//! "take ownership of the policy with `auto_approve:set(...)`"), and options that cannot be
//! honoured.

use flemma_config::{
    AutoApprovePolicy, Config, ConfigError, FrontmatterError, Layer, OpKind, PolicyContext,
    PolicyDecision, PolicyError,
};
use flemma_ids::{ToolName, ToolUseId};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::{chain, strings};

const FIRST_LINE: u32 = 2;

/// The function of the seed's "Configuring approval", as a frontmatter writes it.
const CONFIGURING_APPROVAL: &str = r#"flemma.opt.tools.auto_approve = function(tool_name, input, ctx)
  if tool_name == "grep" then return true end
  if tool_name == "bash" and input.command:match("rm %-rf") then return "deny" end
  return false  -- require approval
end"#;

/// The function form of the seed's "Per-buffer approval".
const PER_BUFFER_APPROVAL: &str = r#"flemma.opt.tools.auto_approve = function(tool_name, input, ctx)
  if tool_name == "grep" then return true end
  return nil  -- pass to next resolver
end"#;

fn apply(code: &str) -> Result<Config, FrontmatterError> {
    let mut config = Config::new();
    config.apply_frontmatter("lua", code, FIRST_LINE)?;
    Ok(config)
}

fn function(config: &Config) -> &AutoApprovePolicy {
    config
        .auto_approve_function()
        .expect("the frontmatter set a function")
}

fn decide(policy: &AutoApprovePolicy, tool: &str, input: &Value) -> PolicyDecision {
    let id = ToolUseId::new("toolu_01").unwrap();
    policy.decide(
        &ToolName::new(tool).unwrap(),
        input,
        &PolicyContext::new(Some(&id)),
    )
}

fn failed(decision: PolicyDecision) -> PolicyError {
    match decision {
        PolicyDecision::Failed(error) => error,
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[test]
fn the_seed_function_decides_each_call_by_its_return_value() {
    let config = apply(CONFIGURING_APPROVAL).unwrap();
    let policy = function(&config);
    assert_eq!(
        decide(policy, "grep", &json!({"pattern": "x"})),
        PolicyDecision::Approve,
        "true approves"
    );
    assert_eq!(
        decide(policy, "bash", &json!({"command": "rm -rf /"})),
        PolicyDecision::Deny(None),
        "\"deny\" denies"
    );
    assert_eq!(
        decide(policy, "bash", &json!({"command": "ls"})),
        PolicyDecision::RequireApproval,
        "false asks"
    );
    assert_eq!(
        decide(policy, "read", &json!({"path": "a"})),
        PolicyDecision::RequireApproval
    );

    let config = apply(PER_BUFFER_APPROVAL).unwrap();
    let policy = function(&config);
    assert_eq!(decide(policy, "grep", &json!({})), PolicyDecision::Approve);
    assert_eq!(
        decide(policy, "read", &json!({})),
        PolicyDecision::Pass,
        "nil passes"
    );
}

#[test]
fn a_function_takes_ownership_of_the_policy() {
    let mut config = Config::new();
    config
        .append(Layer::Setup, "tools.auto_approve", "bash")
        .unwrap();
    config
        .apply_frontmatter("lua", PER_BUFFER_APPROVAL, FIRST_LINE)
        .unwrap();
    // A set: the list below (`$standard` + `bash`) no longer counts, the sandbox resolver
    // stands back (spec §6.4 condition 4).
    assert!(config.layer_has_set(Layer::Frontmatter, "tools.auto_approve"));
    let list = config.list("tools.auto_approve");
    assert_eq!(
        (list.items, list.source.as_str()),
        (Vec::<String>::new(), "F")
    );
    assert!(config.options().unwrap().tools.auto_approve.is_empty());

    // Re-applying without the function forgets it.
    config
        .apply_frontmatter("lua", "flemma.opt.tools.max_concurrent = 4", FIRST_LINE)
        .unwrap();
    assert!(config.auto_approve_function().is_none());
    assert!(
        config
            .list("tools.auto_approve")
            .items
            .contains(&"bash".to_owned())
    );
}

#[test]
fn later_writes_replace_the_function_or_add_to_it() {
    // A list set after it replaces it.
    let config = apply(&format!(
        "{PER_BUFFER_APPROVAL}\nflemma.opt.tools.auto_approve = {{\"read\"}}"
    ))
    .unwrap();
    assert!(config.auto_approve_function().is_none());
    assert_eq!(config.list("tools.auto_approve").items, strings(&["read"]));
    // So does `:set`.
    let config = apply(&format!(
        "{PER_BUFFER_APPROVAL}\nflemma.opt.tools.auto_approve:set({{\"ls\"}})"
    ))
    .unwrap();
    assert!(config.auto_approve_function().is_none());
    assert_eq!(config.list("tools.auto_approve").items, strings(&["ls"]));
    // A list operation after it builds the list consulted when the function passes.
    let config = apply(&format!(
        "{PER_BUFFER_APPROVAL}\nflemma.opt.tools.auto_approve:append(\"bash\")"
    ))
    .unwrap();
    assert!(config.auto_approve_function().is_some());
    assert_eq!(config.list("tools.auto_approve").items, strings(&["bash"]));
    // A function after a list replaces it.
    let config = apply(&format!(
        "flemma.opt.tools.auto_approve = {{\"read\"}}\n{PER_BUFFER_APPROVAL}"
    ))
    .unwrap();
    assert!(config.auto_approve_function().is_some());
    assert!(config.list("tools.auto_approve").items.is_empty());
}

#[test]
fn the_function_is_written_every_way_an_option_is() {
    for code in [
        // `:set` takes a function.
        "flemma.opt.tools.auto_approve:set(function(name) if name == \"grep\" then return true end end)",
        // The alias, a local function.
        "local function policy(name) if name == \"grep\" then return true end end\nflemma.opt.tools.approve = policy",
        // Inside a table of options, next to other options.
        "flemma.opt.tools = { max_concurrent = 4, auto_approve = function(name) if name == \"grep\" then return true end end }",
    ] {
        let config = apply(code).unwrap_or_else(|e| panic!("{code}: {e}"));
        let policy = config.auto_approve_function().expect(code);
        assert_eq!(
            decide(policy, "grep", &json!({})),
            PolicyDecision::Approve,
            "{code}"
        );
        assert_eq!(
            decide(policy, "bash", &json!({})),
            PolicyDecision::Pass,
            "{code}"
        );
        assert!(config.layer_has_set(Layer::Frontmatter, "tools.auto_approve"));
    }
    let config = apply(
        "flemma.opt.tools = { max_concurrent = 4, auto_approve = function() return true end }",
    )
    .unwrap();
    assert_eq!(config.options().unwrap().tools.max_concurrent, 4);
}

#[test]
fn the_function_sees_the_input_as_a_table_and_the_call_id_in_ctx() {
    let config = apply(
        "flemma.opt.tools.auto_approve = function(tool_name, input, ctx)\n\
           return ctx.tool_id == \"toolu_01\" and ctx.bufnr == nil and input.n == 3\n\
             and input.list[2] == \"b\" and input.nested.flag and input.none == nil\n\
             and input.f == 1.5\n\
         end",
    )
    .unwrap();
    let policy = function(&config);
    let input =
        json!({"n": 3, "list": ["a", "b"], "nested": {"flag": true}, "none": null, "f": 1.5});
    assert_eq!(decide(policy, "x", &input), PolicyDecision::Approve);
    let name = ToolName::new("x").unwrap();
    assert_eq!(
        policy.decide(&name, &input, &PolicyContext::default()),
        PolicyDecision::RequireApproval,
        "no id: ctx.tool_id is nil"
    );
}

#[test]
fn calls_do_not_share_state() {
    // Each call runs the chunk in a fresh state: a global set by one call is gone in the next.
    let config = apply(
        "calls = 0\n\
         flemma.opt.tools.auto_approve = function()\n\
           calls = calls + 1\n\
           return calls == 1\n\
         end",
    )
    .unwrap();
    let policy = function(&config);
    for _ in 0..3 {
        assert_eq!(decide(policy, "x", &json!({})), PolicyDecision::Approve);
    }
}

#[test]
fn the_policy_is_send_and_sync_and_decides_from_other_threads() {
    fn assert_send_sync<T: Send + Sync>(_: &T) {}
    let config = apply(CONFIGURING_APPROVAL).unwrap();
    assert_send_sync(&config);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..4)
            .map(|i| {
                let config = &config;
                scope.spawn(move || {
                    let tool = if i % 2 == 0 { "grep" } else { "read" };
                    decide(function(config), tool, &json!({}))
                })
            })
            .collect();
        let decisions: Vec<_> = workers.into_iter().map(|w| w.join().unwrap()).collect();
        assert_eq!(
            decisions,
            [
                PolicyDecision::Approve,
                PolicyDecision::RequireApproval,
                PolicyDecision::Approve,
                PolicyDecision::RequireApproval
            ]
        );
    });
}

#[test]
fn a_failing_function_fails_with_its_transcript_line() {
    // The seed's function on a bash call without `command`: indexing nil, on chunk line 3.
    let config = apply(CONFIGURING_APPROVAL).unwrap();
    let error = failed(decide(function(&config), "bash", &json!({})));
    assert_eq!(
        error.to_string(),
        "line 4: attempt to index a nil value (field 'command')"
    );
    assert_eq!(error.line(), Some(4));

    let config =
        apply("flemma.opt.tools.auto_approve = function()\n  error(\"policy offline\")\nend")
            .unwrap();
    let error = failed(decide(function(&config), "x", &json!({})));
    assert_eq!(error.to_string(), "line 3: policy offline");
}

#[test]
fn a_function_that_runs_too_long_or_too_big_fails() {
    let config =
        apply("flemma.opt.tools.auto_approve = function()\n  while true do end\nend").unwrap();
    let error = failed(decide(function(&config), "x", &json!({})));
    assert_eq!(
        error.to_string(),
        "line 3: the auto_approve function ran too long"
    );

    let config = apply(
        "flemma.opt.tools.auto_approve = function()\n\
           local t = {}\n\
           for i = 1, 1e9 do t[i] = string.rep(\"x\", 1024) end\n\
         end",
    )
    .unwrap();
    let error = failed(decide(function(&config), "x", &json!({})));
    assert_eq!(
        (error.line(), error.message()),
        (None, "memory error: not enough memory")
    );
}

#[test]
fn only_true_false_deny_and_nil_are_results() {
    for (returned, shown) in [
        ("\"approve\"", "\"approve\""),
        ("\"require_approval\"", "\"require_approval\""),
        ("1", "1"),
        ("{}", "a table"),
        ("function() end", "a function"),
    ] {
        let config = apply(&format!(
            "flemma.opt.tools.auto_approve = function() return {returned} end"
        ))
        .unwrap();
        let error = failed(decide(function(&config), "x", &json!({})));
        assert_eq!(
            error.to_string(),
            format!(
                "the auto_approve function returned invalid result: {shown} (expected true, \
                 false, \"deny\" or nil)"
            )
        );
    }
}

#[test]
fn a_policy_holds_its_own_frontmatter() {
    let mut config = Config::new();
    config
        .apply_frontmatter("lua", PER_BUFFER_APPROVAL, FIRST_LINE)
        .unwrap();
    let policy = function(&config).clone();
    // The conversation's frontmatter changing (applied again) does not change a policy
    // already taken from it: it runs the code it was made from.
    config
        .apply_frontmatter(
            "lua",
            "flemma.opt.tools.auto_approve = {\"read\"}",
            FIRST_LINE,
        )
        .unwrap();
    assert!(config.auto_approve_function().is_none());
    assert_eq!(decide(&policy, "grep", &json!({})), PolicyDecision::Approve);
}

#[test]
fn a_function_on_another_option_is_an_error_at_its_line() {
    let err = apply(
        "flemma.opt.tools.max_concurrent = 4\nflemma.opt.tools.max_concurrent = function() end",
    )
    .unwrap_err();
    assert_eq!(
        (err.line, chain(&err)),
        (
            3,
            "line 3: invalid option: option `tools.max_concurrent` expects a non-negative \
             integer, got a function"
                .to_owned()
        )
    );
    assert!(matches!(
        std::error::Error::source(&err).and_then(|e| e.downcast_ref::<ConfigError>()),
        Some(ConfigError::Type { .. })
    ));
}

#[test]
fn set_exists_for_every_list_option_and_takes_ownership() {
    let config = apply("flemma.opt.tools.auto_approve:set({\"$readonly\", \"bash\"})").unwrap();
    assert_eq!(
        config.list("tools.auto_approve").items,
        strings(&["read", "find", "grep", "ls", "bash"])
    );
    assert!(config.layer_has_set(Layer::Frontmatter, "tools.auto_approve"));
    assert!(config.layer_has_op(
        Layer::Frontmatter,
        OpKind::Set,
        "tools.auto_approve",
        Some("bash")
    ));

    let config = apply(
        "flemma.opt.tools:set({\"bash\", \"read\"})\n\
         flemma.opt.tools.grep.exclude:set(\".git\")\n\
         flemma.opt.sandbox.policy.rw_paths:set({\"/tmp\"})\n\
         flemma.opt.tools.env.exclude:set({})",
    )
    .unwrap();
    assert_eq!(config.list("tools").items, strings(&["bash", "read"]));
    assert!(config.layer_has_set(Layer::Frontmatter, "tools"));
    let options = config.options().unwrap();
    assert_eq!(options.tools.grep.exclude, [".git"]);
    assert_eq!(options.sandbox.policy.rw_paths, ["/tmp"]);
    assert!(config.layer_has_set(Layer::Frontmatter, "tools.env.exclude"));

    // A scalar takes `:set` as an assignment; `set` stays an option name (`tools.env.set`).
    let config = apply(
        "flemma.opt.tools.max_concurrent:set(4)\n\
         flemma.opt.tools.env.set = { FOO = \"1\" }\n\
         flemma.opt.tools.env:set({ inherit = \"core\" })",
    )
    .unwrap();
    let options = config.options().unwrap();
    assert_eq!(options.tools.max_concurrent, 4);
    assert_eq!(
        serde_json::to_value(&options.tools.env).unwrap()["set"],
        json!({"FOO": "1"})
    );
    assert_eq!(options.tools.env.inherit, flemma_config::Inherit::Core);
}

#[test]
fn methods_are_called_with_a_colon_and_options_are_not_methods() {
    let err = apply("\nflemma.opt.tools.auto_approve.set({\"read\"})").unwrap_err();
    assert_eq!(
        (err.line, err.message.as_str()),
        (
            3,
            "runtime error: call set with a colon: flemma.opt.tools.auto_approve:set(...)"
        )
    );
    let err = apply("flemma.opt.tools.max_concurrent(4)").unwrap_err();
    assert_eq!(
        err.message,
        "runtime error: flemma.opt.tools.max_concurrent is an option, not a method (options \
         have :set, :append, :prepend and :remove)"
    );
    // `:set` with a bad value: the option's error, at the line.
    let err = apply("\n\nflemma.opt.tools.auto_approve:set(42)").unwrap_err();
    assert_eq!(
        (err.line, chain(&err)),
        (
            4,
            "line 4: invalid option: option `tools.auto_approve` expects a list of strings, got 42"
                .to_owned()
        )
    );
}

#[test]
fn tools_modules_in_lua_frontmatter_is_refused() {
    let err =
        apply("flemma.opt.tools.max_concurrent = 4\nflemma.opt.tools.modules = {\"my.tools\"}")
            .unwrap_err();
    assert_eq!(err.line, 3);
    assert!(
        chain(&err).starts_with(
            "line 3: invalid option: option `tools.modules` is not supported here: Lua tool \
             modules cannot be loaded; register tools in Rust instead, through the `Tool` trait"
        ),
        "{err}"
    );
    let err = apply("flemma.opt.tools.modules:append(\"my.tools\")").unwrap_err();
    assert!(
        chain(&err).contains("`tools.modules` is not supported here"),
        "{err}"
    );
}
