//! Lua frontmatter (feature `lua`): `flemma.opt` writes options into the FRONTMATTER layer.
//!
//! Supported, as real Flemma transcripts write them: assignment
//! (`flemma.opt.tools = {"bash", "read"}`, `flemma.opt.tools.max_concurrent = 4`), the list
//! methods `:append(x)`, `:prepend(x)`, `:remove(x)` and the operators `+` (append), `-`
//! (remove) and `^` (prepend). The Lua state is sandboxed: no `io`, `os`, `package`, `load`,
//! `dofile`, `require` or `print`; memory and instruction count are bounded. The globals the
//! script defines (`recipient = "Ada"`) are returned as template variables.

use std::cell::RefCell;
use std::rc::Rc;

use mlua::{
    HookTriggers, Lua, LuaOptions, MetaMethod, StdLib, Table, UserData, UserDataMethods,
    Value as LuaValue, VmState,
};
use serde_json::{Map, Number, Value};

use crate::config::{Config, Layer};
use crate::error::FrontmatterError;

/// Instructions a frontmatter may run (counted in steps of 1,000).
const INSTRUCTION_BUDGET: u32 = 10_000;
/// Memory a frontmatter may use.
const MEMORY_LIMIT: usize = 16 << 20;

/// One write recorded while the script runs, with the chunk line that made it.
#[derive(Debug, Clone)]
enum Write {
    Set(String, Value),
    Append(String, String),
    Prepend(String, String),
    Remove(String, String),
}

type Log = Rc<RefCell<Vec<(Write, u32)>>>;

/// `flemma.opt` and everything below it.
#[derive(Debug, Clone)]
struct OptProxy {
    path: String,
    log: Log,
}

impl OptProxy {
    /// `flemma.opt.tools["mcp.fs"]`: one key, dots and all (see [`crate::path`]).
    fn child(&self, key: &str) -> Self {
        Self {
            path: crate::path::join(&self.path, key),
            log: Rc::clone(&self.log),
        }
    }

    fn record(&self, lua: &Lua, write: Write) {
        let line = current_line(lua);
        self.log.borrow_mut().push((write, line));
    }

    /// Records one list operation per string in `value` (a string or a list of strings).
    fn list_op(
        &self,
        lua: &Lua,
        value: &LuaValue,
        make: fn(String, String) -> Write,
    ) -> mlua::Result<()> {
        for item in strings(value)? {
            self.record(lua, make(self.path.clone(), item));
        }
        Ok(())
    }
}

fn current_line(lua: &Lua) -> u32 {
    #[allow(
        clippy::redundant_closure_for_method_calls,
        reason = "the method path does not satisfy the higher-ranked lifetime of the callback"
    )]
    lua.inspect_stack(1, |debug| debug.current_line())
        .flatten()
        .map_or(0, |l| u32::try_from(l).unwrap_or(0))
}

fn strings(value: &LuaValue) -> mlua::Result<Vec<String>> {
    match value {
        LuaValue::String(s) => Ok(vec![s.to_str()?.to_owned()]),
        LuaValue::Table(t) => t.sequence_values::<String>().collect(),
        other => Err(mlua::Error::runtime(format!(
            "list operations take a string or a list of strings, got {}",
            other.type_name()
        ))),
    }
}

impl UserData for OptProxy {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_meta_method(MetaMethod::Index, |lua, this, key: String| {
            let method = match key.as_str() {
                "append" => Some(Write::Append as fn(String, String) -> Write),
                "prepend" => Some(Write::Prepend as fn(String, String) -> Write),
                "remove" => Some(Write::Remove as fn(String, String) -> Write),
                _ => None,
            };
            match method {
                Some(make) => {
                    let function = lua.create_function(
                        move |lua, (proxy, value): (mlua::UserDataRef<OptProxy>, LuaValue)| {
                            proxy.list_op(lua, &value, make)
                        },
                    )?;
                    Ok(LuaValue::Function(function))
                }
                None => Ok(LuaValue::UserData(lua.create_userdata(this.child(&key))?)),
            }
        });
        methods.add_meta_method(
            MetaMethod::NewIndex,
            |lua, this, (key, value): (String, LuaValue)| {
                let target = this.child(&key);
                // `flemma.opt.tools = flemma.opt.tools + "x"`: the operator already recorded it.
                if let LuaValue::UserData(ud) = &value
                    && ud.borrow::<OptProxy>().is_ok_and(|p| p.path == target.path)
                {
                    return Ok(());
                }
                let json = to_json(&value, 0)?;
                target.record(lua, Write::Set(target.path.clone(), json));
                Ok(())
            },
        );
        methods.add_meta_function(
            MetaMethod::Add,
            |lua, (proxy, value): (mlua::UserDataRef<OptProxy>, LuaValue)| {
                proxy.list_op(lua, &value, Write::Append)?;
                Ok(proxy.clone())
            },
        );
        methods.add_meta_function(
            MetaMethod::Sub,
            |lua, (proxy, value): (mlua::UserDataRef<OptProxy>, LuaValue)| {
                proxy.list_op(lua, &value, Write::Remove)?;
                Ok(proxy.clone())
            },
        );
        methods.add_meta_function(
            MetaMethod::Pow,
            |lua, (proxy, value): (mlua::UserDataRef<OptProxy>, LuaValue)| {
                proxy.list_op(lua, &value, Write::Prepend)?;
                Ok(proxy.clone())
            },
        );
    }
}

/// Lua → JSON: sequences become arrays, other tables objects with string keys.
fn to_json(value: &LuaValue, depth: u32) -> mlua::Result<Value> {
    if depth > 32 {
        return Err(mlua::Error::runtime("table nested too deeply"));
    }
    Ok(match value {
        LuaValue::Nil => Value::Null,
        LuaValue::Boolean(b) => Value::Bool(*b),
        LuaValue::Integer(i) => Value::from(*i),
        // A float with an exact integer value is that integer, as Lua itself converts it where
        // an integer is required (`flemma.opt.tools.max_concurrent = 8 / 2`).
        #[allow(
            clippy::cast_precision_loss,
            reason = "the bounds are exact powers of two; the cast back is checked by the equality"
        )]
        LuaValue::Number(n) if n.fract() == 0.0 && *n >= -(2f64.powi(63)) && *n < 2f64.powi(63) => {
            Value::from(*n as i64)
        }
        LuaValue::Number(n) => Number::from_f64(*n).map_or(Value::Null, Value::Number),
        LuaValue::String(s) => Value::String(s.to_str()?.to_owned()),
        LuaValue::Table(t) => table_to_json(t, depth)?,
        other => {
            return Err(mlua::Error::runtime(format!(
                "options take strings, numbers, booleans and tables, not a {}",
                other.type_name()
            )));
        }
    })
}

fn table_to_json(table: &Table, depth: u32) -> mlua::Result<Value> {
    let len = table.raw_len();
    let pairs = table.pairs::<LuaValue, LuaValue>().count();
    if len == pairs {
        let items = table
            .sequence_values::<LuaValue>()
            .map(|v| v.and_then(|v| to_json(&v, depth + 1)))
            .collect::<mlua::Result<Vec<_>>>()?;
        return Ok(Value::Array(items));
    }
    let mut map = Map::new();
    for pair in table.pairs::<String, LuaValue>() {
        let (k, v) = pair?;
        map.insert(k, to_json(&v, depth + 1)?);
    }
    Ok(Value::Object(map))
}

/// The chunk line in a Lua error message (`frontmatter:3: …`).
fn error_line(message: &str) -> Option<u32> {
    let rest = message.split("frontmatter:").nth(1)?;
    rest.split(':').next()?.trim().parse().ok()
}

fn sandbox() -> mlua::Result<Lua> {
    let lua = Lua::new_with(
        StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::UTF8,
        LuaOptions::new(),
    )?;
    lua.set_memory_limit(MEMORY_LIMIT)?;
    let globals = lua.globals();
    for name in [
        "load",
        "loadfile",
        "dofile",
        "require",
        "collectgarbage",
        "print",
        "rawset",
        "rawget",
        "setmetatable",
        "getmetatable",
    ] {
        globals.raw_set(name, LuaValue::Nil)?;
    }
    let steps = std::cell::Cell::new(0u32);
    lua.set_hook(
        HookTriggers::new().every_nth_instruction(1_000),
        move |_, debug| {
            steps.set(steps.get() + 1);
            if steps.get() > INSTRUCTION_BUDGET {
                // Located like Lua's own errors, so that the transcript line is the loop's.
                let at = debug
                    .current_line()
                    .map(|line| format!("frontmatter:{line}: "))
                    .unwrap_or_default();
                Err(mlua::Error::runtime(format!(
                    "{at}frontmatter ran too long"
                )))
            } else {
                Ok(VmState::Continue)
            }
        },
    )?;
    Ok(lua)
}

/// Runs a Lua frontmatter and applies what it wrote to the FRONTMATTER layer.
pub(crate) fn apply(
    config: &mut Config,
    code: &str,
    first_line: u32,
) -> Result<Map<String, Value>, FrontmatterError> {
    let at = |chunk_line: u32| first_line + chunk_line.saturating_sub(1);
    let log: Log = Rc::new(RefCell::new(Vec::new()));
    let run = || -> mlua::Result<Map<String, Value>> {
        let lua = sandbox()?;
        let flemma = lua.create_table()?;
        flemma.set(
            "opt",
            OptProxy {
                path: String::new(),
                log: Rc::clone(&log),
            },
        )?;
        lua.globals().set("flemma", flemma)?;
        let before = global_names(&lua);
        lua.load(code).set_name("=frontmatter").exec()?;
        // The globals the script defined are the template variables (`recipient = "Ada"`);
        // values JSON cannot hold (functions) are not variables.
        let mut variables = Map::new();
        for pair in lua.globals().pairs::<LuaValue, LuaValue>() {
            let (key, value) = pair?;
            if let LuaValue::String(key) = key
                && let Ok(key) = key.to_str()
                && !before.contains(&*key)
                && let Ok(value) = to_json(&value, 0)
            {
                variables.insert(key.to_owned(), value);
            }
        }
        Ok(variables)
    };
    let variables = run().map_err(|e| {
        let message = e.to_string();
        let line = error_line(&message).map_or(first_line, at);
        // Lua's error is the script's own message, not a cause of it: its first line is kept
        // as the message (a traceback follows); the line is read from it.
        FrontmatterError::new(line, message.lines().next().unwrap_or_default())
    })?;
    let writes = std::mem::take(&mut *log.borrow_mut());
    for (write, line) in writes {
        config.locate_writes(crate::diagnostic::Locator::line(at(line)));
        let result = match write {
            Write::Set(path, value) => config.set(Layer::Frontmatter, &path, value),
            Write::Append(path, item) => config.append(Layer::Frontmatter, &path, &item),
            Write::Prepend(path, item) => config.prepend(Layer::Frontmatter, &path, &item),
            Write::Remove(path, item) => config.remove(Layer::Frontmatter, &path, &item),
        };
        result.map_err(|e| {
            FrontmatterError::with_source(at(line), crate::sources::INVALID_OPTION, e)
        })?;
    }
    Ok(variables)
}

/// The names of the globals, before the script runs.
fn global_names(lua: &Lua) -> std::collections::HashSet<String> {
    lua.globals()
        .pairs::<LuaValue, LuaValue>()
        .filter_map(|pair| match pair {
            Ok((LuaValue::String(key), _)) => key.to_str().ok().map(|k| k.to_owned()),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_lines_are_found() {
        assert_eq!(
            error_line("frontmatter:3: attempt to call a nil value"),
            Some(3)
        );
        assert_eq!(error_line("runtime error: frontmatter:12: boom"), Some(12));
        assert_eq!(error_line("no line here"), None);
    }
}
