//! Lua frontmatter (feature `lua`): `flemma.opt` writes options into the FRONTMATTER layer.
//!
//! Supported, as real Flemma transcripts write them: assignment
//! (`flemma.opt.tools = {"bash", "read"}`, `flemma.opt.tools.max_concurrent = 4`), the list methods
//! `:set(x)`, `:append(x)`, `:prepend(x)`, `:remove(x)` and the operators `+` (append), `-`
//! (remove) and `^` (prepend), and a function as `tools.auto_approve` (see [`policy`]). The Lua
//! state is flemma's one sandbox ([`sandbox`]): no `io`, `os`, `package`, `load`, `dofile`,
//! `require`, `print`, raw access or metatables; memory and instruction count are bounded. The
//! globals the script defines (`recipient = "Ada"`) are returned as template variables.

pub(crate) mod chunks;
pub(crate) mod patterns;
mod policy;
pub(crate) mod sandbox;

use std::cell::RefCell;
use std::rc::Rc;

use mlua::{Lua, MetaMethod, Table, UserData, UserDataMethods, Value as LuaValue};
use serde_json::{Map, Number, Value};

use crate::config::Config;
use crate::error::FrontmatterError;
use crate::layer::Layer;

/// One write recorded while the script runs, with the chunk line that made it.
#[derive(Debug, Clone)]
enum Write {
    Set(String, Value),
    /// A function assigned to an option (only `tools.auto_approve` takes one).
    Function(String, mlua::Function),
    Append(String, String),
    Prepend(String, String),
    Remove(String, String),
}

/// The writes of a run, each with its chunk line.
type Writes = Vec<(Write, u32)>;
type Log = Rc<RefCell<Writes>>;

/// `flemma.opt` and everything below it.
#[derive(Debug, Clone)]
struct OptProxy {
    path: String,
    /// The proxy this one was read from, and the key it was read with: `flemma.opt.tools`
    /// and `append` for `flemma.opt.tools.append`, which is called as the method
    /// `flemma.opt.tools:append(x)`.
    parent: String,
    key: String,
    log: Log,
}

/// The list methods (`flemma.opt.tools.auto_approve:append("bash")`); `set` works on any
/// option.
const METHODS: [&str; 4] = ["set", "append", "prepend", "remove"];

impl OptProxy {
    fn root(log: &Log) -> Self {
        Self {
            path: String::new(),
            parent: String::new(),
            key: String::new(),
            log: Rc::clone(log),
        }
    }

    /// `flemma.opt.tools["mcp.fs"]`: one key, dots and all (see [`crate::path`]).
    fn child(&self, key: &str) -> Self {
        Self {
            path: crate::path::join(&self.path, key),
            parent: self.path.clone(),
            key: key.to_owned(),
            log: Rc::clone(&self.log),
        }
    }

    /// Records an assignment: a function as such, a table holding a function key by key
    /// (`flemma.opt.tools = { auto_approve = function … end, max_concurrent = 4 }`), any
    /// other value as JSON.
    fn assign(&self, lua: &Lua, value: &LuaValue) -> mlua::Result<()> {
        match value {
            LuaValue::Function(function) => {
                self.record(lua, Write::Function(self.path.clone(), function.clone()));
            }
            LuaValue::Table(table) if !is_sequence(table) && holds_function(table, 0)? => {
                // In key order: `pairs` order differs between states, and the writes of a
                // function are found again by their order (see `policy`).
                let mut pairs = table
                    .pairs::<String, LuaValue>()
                    .collect::<mlua::Result<Vec<_>>>()?;
                pairs.sort_by(|a, b| a.0.cmp(&b.0));
                for (key, value) in pairs {
                    self.child(&key).assign(lua, &value)?;
                }
            }
            value => {
                let json = to_json(value, 0)?;
                self.record(lua, Write::Set(self.path.clone(), json));
            }
        }
        Ok(())
    }

    /// `receiver:<key>(value)`, where `self` is `receiver.<key>`: one of [`METHODS`].
    fn call_method(&self, lua: &Lua, receiver: &LuaValue, value: &LuaValue) -> mlua::Result<()> {
        if !METHODS.contains(&self.key.as_str()) {
            return Err(mlua::Error::runtime(format!(
                "flemma.opt.{} is an option, not a method (options have :set, :append, \
                 :prepend and :remove)",
                self.path
            )));
        }
        let receiver = match receiver {
            LuaValue::UserData(ud) => ud.borrow::<OptProxy>().ok().map(|p| p.clone()),
            _ => None,
        };
        let Some(receiver) = receiver.filter(|r| r.path == self.parent) else {
            return Err(mlua::Error::runtime(format!(
                "call {} with a colon: flemma.opt.{}:{}(...)",
                self.key, self.parent, self.key
            )));
        };
        match self.key.as_str() {
            "set" => receiver.assign(lua, value),
            "append" => receiver.list_op(lua, value, Write::Append),
            "prepend" => receiver.list_op(lua, value, Write::Prepend),
            _ => receiver.list_op(lua, value, Write::Remove),
        }
    }

    fn record(&self, lua: &Lua, write: Write) {
        let line = current_line(lua);
        self.log.borrow_mut().push((write, line));
    }

    /// Records one list operation per string in `value` (a string or a list of strings).
    /// Under `hooks` an append adds hook tables (`flemma.opt.hooks.PreToolUse:append({…})`),
    /// as an assignment of them does: taken where the host lets frontmatters add hooks, an
    /// error otherwise; never dropped.
    fn list_op(
        &self,
        lua: &Lua,
        value: &LuaValue,
        make: fn(String, String) -> Write,
    ) -> mlua::Result<()> {
        if self.path == "hooks" || self.path.starts_with("hooks.") {
            if !matches!(make(String::new(), String::new()), Write::Append(..)) {
                return Err(mlua::Error::runtime(format!(
                    "flemma.opt.{}: hooks can only be added (:append or =)",
                    self.path
                )));
            }
            let hooks = match to_json(value, 0)? {
                Value::Array(items) => Value::Array(items),
                other => Value::Array(vec![other]),
            };
            self.record(lua, Write::Set(self.path.clone(), hooks));
            return Ok(());
        }
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
        // A table with other keys than 1..n is no list: refused, never read as an empty one.
        LuaValue::Table(t) if !is_sequence(t) => Err(mlua::Error::runtime(
            "list operations take a string or a list of strings, got a table with keys",
        )),
        LuaValue::Table(t) => t.sequence_values::<String>().collect(),
        other => Err(mlua::Error::runtime(format!(
            "list operations take a string or a list of strings, got {}",
            other.type_name()
        ))),
    }
}

impl UserData for OptProxy {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        // Every key is an option, the method names too (`tools.env.set` is an option): a
        // method is an option proxy called with its parent (`flemma.opt.tools:append(x)` is
        // `flemma.opt.tools.append(flemma.opt.tools, x)`).
        methods.add_meta_method(MetaMethod::Index, |lua, this, key: String| {
            lua.create_userdata(this.child(&key))
        });
        methods.add_meta_method(
            MetaMethod::Call,
            |lua, this, (receiver, value): (LuaValue, LuaValue)| {
                this.call_method(lua, &receiver, &value)
            },
        );
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
                target.assign(lua, &value)
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

/// Whether a table is a list (what [`to_json`] makes an array).
fn is_sequence(table: &Table) -> bool {
    table.raw_len() == table.pairs::<LuaValue, LuaValue>().count()
}

/// Whether a table holds a function, at any depth (bounded like [`to_json`]).
fn holds_function(table: &Table, depth: u32) -> mlua::Result<bool> {
    if depth > 32 {
        return Err(mlua::Error::runtime("table nested too deeply"));
    }
    for pair in table.pairs::<LuaValue, LuaValue>() {
        match pair?.1 {
            LuaValue::Function(_) => return Ok(true),
            LuaValue::Table(inner) if holds_function(&inner, depth + 1)? => return Ok(true),
            _ => {}
        }
    }
    Ok(false)
}

fn table_to_json(table: &Table, depth: u32) -> mlua::Result<Value> {
    if is_sequence(table) {
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

/// A frontmatter run: the state (its globals, its functions) and the writes it recorded.
struct Evaluated {
    lua: Lua,
    log: Log,
    /// The globals before the script ran.
    before: std::collections::HashSet<String>,
}

/// The frontmatter chunks compiled so far.
static FRONTMATTER: chunks::Chunks = chunks::Chunks::new("=frontmatter");

/// Runs a frontmatter chunk in a fresh sandbox (compiled once per source: see [`chunks`]).
fn evaluate(code: &str) -> mlua::Result<Evaluated> {
    let log: Log = Rc::new(RefCell::new(Vec::new()));
    let lua = sandbox::lua_sandbox(sandbox::LuaUse::Frontmatter)?;
    let flemma = lua.create_table()?;
    flemma.set("opt", OptProxy::root(&log))?;
    lua.globals().set("flemma", flemma)?;
    let before = global_names(&lua);
    FRONTMATTER.load(&lua, code)?.call::<()>(())?;
    Ok(Evaluated { lua, log, before })
}

/// The first line of a Lua error (a traceback follows) and its transcript line, when the
/// message names a chunk line.
fn lua_error(error: &mlua::Error, first_line: u32) -> (Option<u32>, String) {
    let message = error.to_string();
    let line = error_line(&message).map(|chunk_line| first_line + chunk_line.saturating_sub(1));
    (line, message.lines().next().unwrap_or_default().to_owned())
}

/// Runs a Lua frontmatter and applies what it wrote to the FRONTMATTER layer.
pub(crate) fn apply(
    config: &mut Config,
    code: &str,
    first_line: u32,
) -> Result<Map<String, Value>, FrontmatterError> {
    let at = |chunk_line: u32| first_line + chunk_line.saturating_sub(1);
    let run = || -> mlua::Result<(Map<String, Value>, Writes)> {
        let Evaluated { lua, log, before } = evaluate(code)?;
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
        let writes = std::mem::take(&mut *log.borrow_mut());
        Ok((variables, writes))
    };
    let (variables, writes) = run().map_err(|e| {
        // Lua's error is the script's own message, not a cause of it: its first line is kept
        // as the message; the line is read from it.
        let (line, message) = lua_error(&e, first_line);
        FrontmatterError::new(line.unwrap_or(first_line), message)
    })?;
    // The functions are asked per call by running the chunk again (see `policy`): the code
    // is shared by every function it assigns.
    let shared: Option<std::sync::Arc<str>> = writes
        .iter()
        .any(|(w, _)| matches!(w, Write::Function(..)))
        .then(|| code.into());
    let mut functions: Vec<String> = Vec::new();
    for (write, line) in writes {
        config.locate_writes(crate::locator::Locator::line(at(line)));
        let result = match write {
            Write::Set(path, value) => config.set(Layer::Frontmatter, &path, value),
            Write::Function(path, _) => {
                let code = shared.clone().unwrap_or_else(|| code.into());
                // The function is found again as the n-th function written to its path.
                let nth = functions.iter().filter(|p| **p == path).count();
                functions.push(path.clone());
                let policy = policy::LuaPolicy::new(code, first_line, nth, path.clone());
                config.set_auto_approve_function(Layer::Frontmatter, &path, policy.into_policy())
            }
            Write::Append(path, item) => config.append(Layer::Frontmatter, &path, &item),
            Write::Prepend(path, item) => config.prepend(Layer::Frontmatter, &path, &item),
            Write::Remove(path, item) => config.remove(Layer::Frontmatter, &path, &item),
        };
        result.map_err(|e| {
            FrontmatterError::with_source(at(line), crate::error::INVALID_OPTION, e)
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
