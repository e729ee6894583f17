//! The Lua template engine (feature `lua`): templates as the reference implementation writes
//! them.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::rc::Rc;

use mlua::{Lua, Table, Value as LuaValue};

use super::{Program, Scope, Syntax, TemplateEngine, TemplateError, TemplatePiece};

/// Renders templates as Lua, as the reference implementation does: `{{ expr }}` is a Lua
/// expression (`nil` renders as nothing) and `{% code %}` Lua statements, which may wrap the
/// text after them (`{% for i = 1, 3 do %}` … `{% end %}`).
///
/// The environment is a sandbox: `string`, `table`, `math`, `utf8`, `os.date`, `os.time`,
/// `os.clock`, `os.difftime`, the base functions without `load`/`require`/file access, raw
/// access or metatables (flemma-config's one Lua sandbox, the frontmatter's too), the
/// scope's variables, `__filename` (`nil` for an unsaved conversation), `__dirname` and
/// `include(path)` / `include(path, {binary = true, mime = "image/png"})`. A template runs
/// with a memory limit and an instruction budget.
///
/// ```
/// use std::sync::Arc;
/// use flemma_providers::{LuaEngine, Part, PromptBuilder};
///
/// let doc = flemma_ast::parse("@You:\n{% for i = 1, 3 do %}{{ i }}{% end %} {{ string.upper('go') }}\n");
/// let prompt = PromptBuilder::new().engine(Arc::new(LuaEngine::new())).build(&doc);
/// assert_eq!(prompt.messages[0].parts, vec![Part::Text { text: "123 GO".into() }]);
/// ```
#[derive(Debug, Default, Clone, Copy)]
pub struct LuaEngine {
    _private: (),
}

impl LuaEngine {
    /// The engine.
    pub fn new() -> Self {
        Self::default()
    }
}

impl TemplateEngine for LuaEngine {
    fn render(&self, pieces: &[TemplatePiece<'_>], scope: &Scope) -> Result<String, TemplateError> {
        let mut program = Program::generate::<LuaSyntax>(pieces, PRELUDE);
        program.source.push_str("return table.concat(__flemma_out)");
        let references = std::mem::take(&mut program.references);
        let raised: Rc<RefCell<Option<TemplateError>>> = Rc::default();
        let run = || -> mlua::Result<String> {
            let lua = flemma_config::lua_sandbox(flemma_config::LuaUse::Template)?;
            let globals = lua.globals();
            globals.set(
                "__flemma_text",
                lua.create_sequence_from(program.texts.iter().map(String::as_str))?,
            )?;
            for (name, value) in scope.variables() {
                globals.set(name.as_str(), to_lua(&lua, value, 0)?)?;
            }
            globals.set(
                "__filename",
                scope.filename().map(|p| p.to_string_lossy().into_owned()),
            )?;
            globals.set("__dirname", scope.dirname().to_string_lossy().into_owned())?;
            {
                let (scope, raised) = (scope.clone(), Rc::clone(&raised));
                let include =
                    lua.create_function(move |_, (path, options): (String, Option<Table>)| {
                        let binary = options
                            .as_ref()
                            .and_then(|o| o.get::<Option<bool>>("binary").ok().flatten())
                            .unwrap_or(false);
                        let mime = options
                            .as_ref()
                            .and_then(|o| o.get::<Option<String>>("mime").ok().flatten());
                        let result = if binary {
                            scope.include_file(&path, mime.as_deref())
                        } else {
                            scope.include(&path)
                        };
                        result.map_err(|err| {
                            let message = err.to_string();
                            raised.borrow_mut().get_or_insert(err);
                            mlua::Error::runtime(message)
                        })
                    })?;
                globals.set("include", include)?;
            }
            {
                let scope = scope.clone();
                let file = lua.create_function(move |_, index: usize| {
                    Ok(references
                        .get(index)
                        .map_or_else(String::new, |r| scope.reference(&r.borrow())))
                })?;
                globals.set("__flemma_file", file)?;
            }
            // The program ends with a `return`: a chunk, compiled once per source.
            TEMPLATES.load(&lua, &program.source)?.call::<String>(())
        };
        run().map_err(|err| {
            raised.borrow_mut().take().unwrap_or_else(|| {
                let message = err.to_string();
                let message = message.lines().next().unwrap_or_default().to_owned();
                // mlua's errors are not `Send`; the message carries what they say.
                TemplateError::Render {
                    line: error_line(&message).map(|l| program.transcript_line(l)),
                    message,
                    source: None,
                }
            })
        })
    }
}

/// The template programs compiled so far (compiled once per program, evaluated per render).
static TEMPLATES: flemma_config::LuaChunks = flemma_config::LuaChunks::new("=template");

/// Lua: statements appending to a local buffer; padding is blank lines.
struct LuaSyntax;

/// Declares the buffer and `__flemma_emit` (which skips `nil`), on the first line.
const PRELUDE: &str = "local __flemma_out, __flemma_n = {}, 0; \
     local function __flemma_emit(v) if v ~= nil then __flemma_n = __flemma_n + 1; \
     __flemma_out[__flemma_n] = tostring(v) end end; ";

impl Syntax for LuaSyntax {
    fn text(out: &mut String, index: usize) {
        let _ = write!(out, "__flemma_emit(__flemma_text[{}]); ", index + 1);
    }

    fn file(out: &mut String, index: usize) {
        let _ = write!(out, "__flemma_emit(__flemma_file({index})); ");
    }

    fn pad(out: &mut String, lines: usize) {
        out.extend(std::iter::repeat_n('\n', lines));
    }

    fn expression(out: &mut String, code: &str) {
        let _ = write!(out, "__flemma_emit(({code})); ");
    }

    fn code(out: &mut String, code: &str) {
        out.push_str(code);
        out.push_str("; ");
    }
}

/// The chunk line in a Lua error message (`template:3: …`).
fn error_line(message: &str) -> Option<u32> {
    let rest = message.split("template:").nth(1)?;
    rest.split(':').next()?.trim().parse().ok()
}

/// A JSON value as a Lua value (`null` is `nil`).
fn to_lua(lua: &Lua, value: &serde_json::Value, depth: usize) -> mlua::Result<LuaValue> {
    if depth > 64 {
        return Err(mlua::Error::runtime("variable nests too deep"));
    }
    Ok(match value {
        serde_json::Value::Null => LuaValue::Nil,
        serde_json::Value::Bool(b) => LuaValue::Boolean(*b),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => LuaValue::Integer(i),
            None => LuaValue::Number(n.as_f64().unwrap_or(f64::NAN)),
        },
        serde_json::Value::String(s) => LuaValue::String(lua.create_string(s)?),
        serde_json::Value::Array(items) => {
            let table = lua.create_table_with_capacity(items.len(), 0)?;
            for item in items {
                table.raw_push(to_lua(lua, item, depth + 1)?)?;
            }
            LuaValue::Table(table)
        }
        serde_json::Value::Object(map) => {
            let table = lua.create_table_with_capacity(0, map.len())?;
            for (k, v) in map {
                table.raw_set(k.as_str(), to_lua(lua, v, depth + 1)?)?;
            }
            LuaValue::Table(table)
        }
    })
}
