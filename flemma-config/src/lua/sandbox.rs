//! The one Lua sandbox of flemma: the frontmatter's state and the templates' states are made
//! here, with one list of what is taken away, so the two cannot drift apart.
//!
//! A state has `string`, `table`, `math` and `utf8`, the base functions without `load`,
//! `loadfile`, `dofile`, `require`, `collectgarbage`, `print`, raw access (`rawset`, `rawget`)
//! and metatables (`setmetatable`, `getmetatable`: the frontmatter's `flemma.opt` is a proxy
//! whose writes are recorded, and nothing may reach around it), no `io`, `package` or `debug`,
//! and `os` only where its use says (`os.date`, `os.time`, `os.clock`, `os.difftime` for
//! templates). Memory and instructions are bounded (the pattern functions count their own
//! steps, see [`patterns`](super::patterns)).

use mlua::{HookTriggers, Lua, LuaOptions, StdLib, Table, Value as LuaValue, VmState};

/// The base functions a sandboxed state does not have.
const TAKEN_AWAY: [&str; 10] = [
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
];

/// What a sandboxed Lua state runs: its chunk name in errors, its budgets and its library.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LuaUse {
    /// A conversation's Lua frontmatter (16 MiB, 10 million instructions, no `os`).
    Frontmatter,
    /// A Lua template (64 MiB, 100 million instructions, `os`'s clock and date functions).
    Template,
}

impl LuaUse {
    /// The chunk name errors are located by (`frontmatter:3: …`).
    pub fn label(self) -> &'static str {
        match self {
            Self::Frontmatter => "frontmatter",
            Self::Template => "template",
        }
    }

    fn memory_limit(self) -> usize {
        match self {
            Self::Frontmatter => 16 << 20,
            Self::Template => 64 << 20,
        }
    }

    /// Thousands of instructions a run may take.
    fn instruction_budget(self) -> u32 {
        match self {
            Self::Frontmatter => 10_000,
            Self::Template => 100_000,
        }
    }
}

/// A fresh sandboxed state for `usage`: `string`, `table`, `math`, `utf8` and the base
/// functions without `load`, `loadfile`, `dofile`, `require`, `collectgarbage`, `print`, raw
/// access or metatables; `os`'s clock and date functions for templates only; bounded memory,
/// instructions and pattern functions.
///
/// # Errors
///
/// mlua's, when the state cannot be made.
pub fn lua_sandbox(usage: LuaUse) -> mlua::Result<Lua> {
    let mut libs = StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::UTF8;
    if usage == LuaUse::Template {
        libs |= StdLib::OS;
    }
    let lua = Lua::new_with(libs, LuaOptions::new())?;
    lua.set_memory_limit(usage.memory_limit())?;
    let globals = lua.globals();
    for name in TAKEN_AWAY {
        globals.raw_set(name, LuaValue::Nil)?;
    }
    if usage == LuaUse::Template {
        // `os` keeps its clock and date functions only.
        let os: Table = globals.get("os")?;
        let safe = lua.create_table()?;
        for name in ["date", "time", "clock", "difftime"] {
            safe.set(name, os.get::<LuaValue>(name)?)?;
        }
        globals.set("os", safe)?;
    }
    let what: &'static str = match usage {
        LuaUse::Frontmatter => "frontmatter ran too long",
        LuaUse::Template => "template ran too long",
    };
    set_budget(&lua, usage, what)?;
    // The pattern functions count their own steps: the budget above never fires inside them.
    super::patterns::install(&lua)?;
    Ok(lua)
}

/// Gives the state a fresh instruction budget of `usage`; running out raises `what`, located
/// like Lua's own errors (`frontmatter:3: …`), so that the transcript line is the loop's.
pub(crate) fn set_budget(lua: &Lua, usage: LuaUse, what: &'static str) -> mlua::Result<()> {
    let budget = usage.instruction_budget();
    let label = usage.label();
    let steps = std::cell::Cell::new(0u32);
    lua.set_hook(
        HookTriggers::new().every_nth_instruction(1_000),
        move |_, debug| {
            steps.set(steps.get() + 1);
            if steps.get() > budget {
                let at = debug
                    .current_line()
                    .map(|line| format!("{label}:{line}: "))
                    .unwrap_or_default();
                Err(mlua::Error::runtime(format!("{at}{what}")))
            } else {
                Ok(VmState::Continue)
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both uses take away the same functions; only templates have `os`, and only its clock.
    #[test]
    fn both_uses_take_away_the_same_functions() {
        for usage in [LuaUse::Frontmatter, LuaUse::Template] {
            let lua = lua_sandbox(usage).unwrap();
            for name in TAKEN_AWAY.iter().chain(&["io", "package", "debug"]) {
                let value: LuaValue = lua.globals().get(*name).unwrap();
                assert!(value.is_nil(), "{usage:?} has {name}");
            }
            let os: LuaValue = lua.globals().get("os").unwrap();
            match usage {
                LuaUse::Frontmatter => assert!(os.is_nil()),
                LuaUse::Template => {
                    let os = os.as_table().unwrap();
                    assert!(os.get::<LuaValue>("execute").unwrap().is_nil());
                    assert!(os.get::<LuaValue>("getenv").unwrap().is_nil());
                    assert!(!os.get::<LuaValue>("time").unwrap().is_nil());
                }
            }
        }
    }

    #[test]
    fn a_loop_runs_out_of_its_budget_with_its_line() {
        for usage in [LuaUse::Frontmatter, LuaUse::Template] {
            let lua = lua_sandbox(usage).unwrap();
            let error = lua
                .load("local x = 0\nwhile true do x = x + 1 end")
                .set_name(format!("={}", usage.label()))
                .exec()
                .unwrap_err()
                .to_string();
            assert!(
                error.contains(&format!(
                    "{}:2: {} ran too long",
                    usage.label(),
                    usage.label()
                )),
                "{error}"
            );
        }
    }
}
