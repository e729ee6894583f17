//! The default template engine: Jinja expressions through minijinja.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use minijinja::value::{Kwargs, Value};
use minijinja::{Environment, Error, ErrorKind};

use super::{Program, Scope, Syntax, TemplateEngine, TemplateError, TemplatePiece};

/// The instructions a template may run (minijinja fuel).
const FUEL: u64 = 10_000_000;

/// Renders templates as Jinja (minijinja), the default engine.
///
/// `{{ expr }}` is a Jinja expression and `{% … %}` a Jinja statement (`{% if x %}` …
/// `{% endif %}`, `{% for %}`, `{% set %}`), with the scope's variables, `__filename`,
/// `__dirname` (unset for an unsaved conversation) and
/// `include(path)` / `include(path, binary=true, mime="image/png")` (a map as the second
/// argument works too, as in `include(path, {"binary": true})`). Undefined names render as
/// nothing; calling one is an error. A template runs on a budget of ten million
/// instructions, so a runaway loop is an error rather than a hang.
///
/// ```
/// use std::sync::Arc;
/// use flemma_providers::{MiniJinjaEngine, Part, PromptBuilder};
///
/// let doc = flemma_ast::parse("@You:\n{% if n > 1 %}{{ n }} items{% else %}one item{% endif %}\n");
/// let mut vars = serde_json::Map::new();
/// vars.insert("n".into(), 3.into());
/// let prompt = PromptBuilder::new().engine(Arc::new(MiniJinjaEngine::new())).variables(vars).build(&doc);
/// assert_eq!(prompt.messages[0].parts, vec![Part::Text { text: "3 items".into() }]);
/// ```
#[derive(Debug, Default, Clone, Copy)]
pub struct MiniJinjaEngine {
    _private: (),
}

impl MiniJinjaEngine {
    /// The engine.
    pub fn new() -> Self {
        Self::default()
    }
}

impl TemplateEngine for MiniJinjaEngine {
    fn render(&self, pieces: &[TemplatePiece<'_>], scope: &Scope) -> Result<String, TemplateError> {
        let mut program = Program::generate::<Jinja>(pieces, "");
        let references = std::mem::take(&mut program.references);
        let texts = std::mem::take(&mut program.texts);

        // An error raised by `include()` is kept here whole, so that it reaches the caller as
        // the TemplateError it is rather than as a minijinja message.
        let raised: Arc<Mutex<Option<TemplateError>>> = Arc::default();
        let mut env = Environment::new();
        env.set_recursion_limit(64);
        // A transcript is input: a runaway loop stops instead of hanging the prompt build.
        env.set_fuel(Some(FUEL));
        {
            let (scope, raised) = (scope.clone(), Arc::clone(&raised));
            env.add_function(
                "include",
                move |path: String, options: Option<Value>, kwargs: Kwargs| {
                    let option = |key: &str| -> Result<Option<Value>, Error> {
                        let from_map = options
                            .as_ref()
                            .and_then(|map| map.get_attr(key).ok())
                            .filter(|v| !v.is_undefined() && !v.is_none());
                        let from_kwargs: Option<Value> = kwargs.get(key)?;
                        Ok(from_kwargs.or(from_map))
                    };
                    let binary = option("binary")?.is_some_and(|v| v.is_true());
                    let mime = option("mime")?.and_then(|v| v.as_str().map(str::to_owned));
                    let result = if binary {
                        scope.include_file(&path, mime.as_deref())
                    } else {
                        scope.include(&path)
                    };
                    result.map_err(|err| raise(&raised, err))
                },
            );
        }
        {
            let scope = scope.clone();
            env.add_function("__flemma_file", move |index: usize| {
                references
                    .get(index)
                    .map_or_else(String::new, |r| scope.reference(&r.borrow()))
            });
        }

        let mut context: BTreeMap<String, Value> = scope
            .variables()
            .iter()
            .map(|(k, v)| (k.clone(), from_json(v)))
            .collect();
        context.insert(
            "__filename".into(),
            scope
                .filename()
                .map(|p| Value::from(p.to_string_lossy().into_owned()))
                .unwrap_or_default(),
        );
        context.insert(
            "__dirname".into(),
            Value::from(scope.dirname().to_string_lossy().into_owned()),
        );
        context.insert("__flemma_text".into(), Value::from(texts));

        let rendered = env
            .template_from_str(&program.source)
            .and_then(|template| template.render(Value::from(context)));
        match rendered {
            Ok(text) => Ok(text),
            Err(err) => Err(take(&raised).unwrap_or_else(|| {
                let line = err
                    .line()
                    .and_then(|l| u32::try_from(l).ok())
                    .map(|l| program.transcript_line(l));
                let message = match err.detail() {
                    Some(detail) => format!("{}: {detail}", err.kind()),
                    None => err.kind().to_string(),
                };
                // The message is minijinja's error, less its name for the generated
                // template; as the source too it would be printed twice. The errors of our
                // own functions are kept typed (`raised`).
                TemplateError::Render {
                    line,
                    message,
                    source: None,
                }
            })),
        }
    }
}

/// Stores `err` for the caller and returns the minijinja error that aborts rendering.
fn raise(slot: &Mutex<Option<TemplateError>>, err: TemplateError) -> Error {
    let message = err.to_string();
    let mut slot = slot
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    slot.get_or_insert(err);
    Error::new(ErrorKind::InvalidOperation, message)
}

fn take(slot: &Mutex<Option<TemplateError>>) -> Option<TemplateError> {
    slot.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take()
}

/// Jinja: texts through `__flemma_text`, padding in comments.
struct Jinja;

impl Syntax for Jinja {
    fn text(out: &mut String, index: usize) {
        let _ = write!(out, "{{{{ __flemma_text[{index}] }}}}");
    }

    fn file(out: &mut String, index: usize) {
        let _ = write!(out, "{{{{ __flemma_file({index}) }}}}");
    }

    fn pad(out: &mut String, lines: usize) {
        out.push_str("{#");
        out.extend(std::iter::repeat_n('\n', lines));
        out.push_str("#}");
    }

    fn expression(out: &mut String, code: &str) {
        let _ = write!(out, "{{{{{code}}}}}");
    }

    fn code(out: &mut String, code: &str) {
        let _ = write!(out, "{{%{code}%}}");
    }
}

/// A JSON value as a template value.
fn from_json(value: &serde_json::Value) -> Value {
    match value {
        serde_json::Value::Null => Value::from(()),
        serde_json::Value::Bool(b) => Value::from(*b),
        serde_json::Value::Number(n) => n
            .as_i64()
            .map(Value::from)
            .or_else(|| n.as_u64().map(Value::from))
            .unwrap_or_else(|| Value::from(n.as_f64().unwrap_or(f64::NAN))),
        serde_json::Value::String(s) => Value::from(s.as_str()),
        serde_json::Value::Array(items) => {
            Value::from(items.iter().map(from_json).collect::<Vec<_>>())
        }
        serde_json::Value::Object(map) => Value::from(
            map.iter()
                .map(|(k, v)| (k.clone(), from_json(v)))
                .collect::<BTreeMap<_, _>>(),
        ),
    }
}
