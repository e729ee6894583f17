//! A Lua function as `tools.auto_approve`, asked once per call.
//!
//! ```lua
//! flemma.opt.tools.auto_approve = function(tool_name, input, ctx)
//!   if tool_name == "grep" then return true end
//!   if tool_name == "bash" and input.command:match("rm %-rf") then return "deny" end
//!   return false  -- require approval
//! end
//! ```
//!
//! `true` approves, `false` asks, `"deny"` refuses, `nil` passes (to the list operations
//! written after the function, then to the next resolvers). `input` is the call's input as a
//! Lua table (JSON `null` is `nil`); `ctx.tool_id` is the call's id (`ctx.bufnr` is `nil`: there
//! are no buffers here).
//!
//! **The function is not kept alive.** Each call runs the frontmatter chunk again, in a fresh
//! sandbox with the frontmatter's limits, takes the function from the same write, and calls it
//! with a budget of its own. A Lua state is neither `Send` nor `Sync` (and mlua's `send`
//! feature would put every callback behind a lock), while options are shared by every task
//! of a host; a state kept per policy would also let one call's globals leak into the next.
//! Running the chunk again costs a fresh state and the chunk: about 0.1 ms per call for the
//! seed's function in a release build (0.5 ms unoptimised), once per tool call. The function
//! is found again as the n-th function the run writes to the same path; a run that writes
//! fewer (a frontmatter that depends on `math.random`) does not approve the call.
//!
//! **Failing closed.** An error, an exhausted instruction budget, the memory limit or a
//! return value other than the four above is [`PolicyDecision::Failed`]: the config resolver
//! asks for approval and reports the error.

use std::sync::Arc;

use flemma_ids::ToolName;
use mlua::{Lua, Value as LuaValue};
use serde_json::Value;

use super::sandbox::{LuaUse, set_budget};
use super::{Write, evaluate, lua_error};
use crate::config::{AutoApprovePolicy, PolicyContext, PolicyDecision};
use crate::error::PolicyError;

/// How deep the conversion of a call's input to Lua goes: above the parser's own limit
/// (`flemma_ast::MAX_INPUT_DEPTH`), so every input the parser accepts converts.
const MAX_DEPTH: u32 = 128;

/// The function of one frontmatter write, found again by running the frontmatter.
#[derive(Debug, Clone)]
pub(super) struct LuaPolicy {
    code: Arc<str>,
    first_line: u32,
    /// Which of the functions written to `path` (0: the first): the writes of other
    /// options may come in another order in another run (a loop over `pairs`).
    nth: usize,
    /// The option path it was assigned to, as written.
    path: String,
}

impl LuaPolicy {
    pub(super) fn new(code: Arc<str>, first_line: u32, nth: usize, path: String) -> Self {
        Self {
            code,
            first_line,
            nth,
            path,
        }
    }

    pub(super) fn into_policy(self) -> AutoApprovePolicy {
        AutoApprovePolicy::with_context(move |tool, input, ctx| {
            self.call(tool, input, *ctx)
                .unwrap_or_else(PolicyDecision::Failed)
        })
    }

    fn error(&self, error: &mlua::Error) -> PolicyError {
        let (line, message) = lua_error(error, self.first_line);
        // The transcript line replaces the chunk's (`frontmatter:3: boom` → line 4: `boom`).
        let message = match message.split_once("frontmatter:") {
            Some((_, rest)) if line.is_some() => rest
                .split_once(": ")
                .map_or(rest, |(_, text)| text)
                .to_owned(),
            _ => message,
        };
        PolicyError::new(line, message)
    }

    fn call(
        &self,
        tool: &ToolName,
        input: &Value,
        ctx: PolicyContext<'_>,
    ) -> Result<PolicyDecision, PolicyError> {
        let evaluated = evaluate(&self.code).map_err(|e| self.error(&e))?;
        let found = evaluated
            .log
            .borrow()
            .iter()
            .filter_map(|(write, _)| match write {
                Write::Function(path, function) if *path == self.path => Some(function.clone()),
                _ => None,
            })
            .nth(self.nth);
        let Some(function) = found else {
            return Err(PolicyError::new(
                None,
                "the frontmatter assigned no auto_approve function at the same place when run \
                 again for this call",
            ));
        };
        let lua = &evaluated.lua;
        let result = (|| -> mlua::Result<LuaValue> {
            set_budget(
                lua,
                LuaUse::Frontmatter,
                "the auto_approve function ran too long",
            )?;
            let context = lua.create_table()?;
            if let Some(id) = ctx.tool_id {
                context.set("tool_id", id.as_str())?;
            }
            function.call((tool.as_str(), to_lua(lua, input, 0)?, context))
        })()
        .map_err(|e| self.error(&e))?;
        match result {
            LuaValue::Boolean(true) => Ok(PolicyDecision::Approve),
            LuaValue::Boolean(false) => Ok(PolicyDecision::RequireApproval),
            LuaValue::Nil => Ok(PolicyDecision::Pass),
            LuaValue::String(s) if s.to_str().is_ok_and(|s| s == "deny") => {
                Ok(PolicyDecision::Deny(None))
            }
            other => Err(PolicyError::new(
                None,
                format!(
                    "the auto_approve function returned invalid result: {} (expected true, \
                     false, \"deny\" or nil)",
                    describe(&other)
                ),
            )),
        }
    }
}

/// A returned value as an error shows it.
fn describe(value: &LuaValue) -> String {
    match value {
        LuaValue::String(s) => format!("{:?}", s.to_string_lossy()),
        LuaValue::Integer(i) => i.to_string(),
        LuaValue::Number(n) => n.to_string(),
        other => format!("a {}", other.type_name()),
    }
}

/// JSON → Lua: arrays become sequences, objects tables with string keys, `null` `nil`.
fn to_lua(lua: &Lua, value: &Value, depth: u32) -> mlua::Result<LuaValue> {
    if depth > MAX_DEPTH {
        return Err(mlua::Error::runtime(
            "the call's input is nested too deeply",
        ));
    }
    Ok(match value {
        Value::Null => LuaValue::Nil,
        Value::Bool(b) => LuaValue::Boolean(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => LuaValue::Integer(i),
            None => LuaValue::Number(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => LuaValue::String(lua.create_string(s)?),
        Value::Array(items) => {
            let table = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.iter().enumerate() {
                table.raw_set(i + 1, to_lua(lua, item, depth + 1)?)?;
            }
            LuaValue::Table(table)
        }
        Value::Object(map) => {
            let table = lua.create_table_with_capacity(0, map.len())?;
            for (key, item) in map {
                table.raw_set(key.as_str(), to_lua(lua, item, depth + 1)?)?;
            }
            LuaValue::Table(table)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run of the chunk that does not assign a function at the recorded place (a
    /// frontmatter depending on `math.random`) never approves.
    #[test]
    fn a_write_not_found_again_fails_closed() {
        let code: Arc<str> = "flemma.opt.tools.auto_approve = function() return true end".into();
        let tool = ToolName::new("x").unwrap_or_else(|e| panic!("{e}"));
        let input = Value::Null;
        let ctx = PolicyContext::default();
        let found = LuaPolicy::new(Arc::clone(&code), 2, 0, "tools.auto_approve".to_owned());
        assert_eq!(
            found.into_policy().decide(&tool, &input, &ctx),
            PolicyDecision::Approve
        );
        for (nth, path) in [(1, "tools.auto_approve"), (0, "tools.approve")] {
            let moved = LuaPolicy::new(Arc::clone(&code), 2, nth, path.to_owned());
            assert_eq!(
                moved.into_policy().decide(&tool, &input, &ctx),
                PolicyDecision::Failed(PolicyError::new(
                    None,
                    "the frontmatter assigned no auto_approve function at the same place when \
                     run again for this call"
                ))
            );
        }
    }
}
