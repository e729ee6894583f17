//! Where options come from: `flemma.toml` (SETUP) and a conversation's frontmatter.

use std::path::Path;

use serde_json::{Map, Value};

use crate::config::Config;
use crate::error::{ConfigError, FrontmatterError, INVALID_OPTION, TomlError};
use crate::layer::Layer;
use crate::locator::Locator;
use crate::presets::Preset;

impl Config {
    /// Loads a `flemma.toml` into the SETUP layer.
    ///
    /// The file's keys are the option paths (`[tools] max_concurrent = 4`, or dotted keys);
    /// the `tools` list itself is `tools.list` inside a `[tools]` table (or `tools = [...]` when
    /// the file has no `[tools]` table); presets are tables under `[presets."$name"]` with
    /// `auto_approve`, `tools`, `provider`, `model` and `parameters`. The host sections
    /// ([`HOST_SECTIONS`](crate::HOST_SECTIONS): `[mcp]`, `[hooks]`) are not options: they are kept
    /// as written for the crate that reads them ([`Config::section`]).
    ///
    /// ```toml
    /// model = "claude-sonnet-4-5"
    ///
    /// [tools]
    /// list = ["$standard", "bash"]
    /// auto_approve = ["$standard", "+bash", "!write"]
    /// max_concurrent = 4
    ///
    /// [tools.bash]
    /// env = { RUST_LOG = "debug" }
    ///
    /// [sandbox]
    /// enabled = true
    /// policy.network = false
    ///
    /// [presets."$ci"]
    /// auto_approve = ["bash", "flemma.*"]
    /// ```
    ///
    /// # Errors
    ///
    /// [`ConfigError::Io`] when the file cannot be read, [`ConfigError::Toml`] (with line and
    /// column) when it is not TOML, and the option errors of [`Config::set`] wrapped in
    /// [`ConfigError::InFile`].
    ///
    /// The file joins [`Config::protected_files`]: tools may not write it.
    pub fn load_toml_file(&mut self, path: &Path) -> Result<(), ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: path.to_owned(),
            source,
        })?;
        self.load_toml_str(&text, path)?;
        self.protect_file(path);
        Ok(())
    }

    /// Loads TOML text into the SETUP layer; `origin` names it in errors.
    ///
    /// # Errors
    ///
    /// As [`Config::load_toml_file`], without the I/O error.
    pub fn load_toml_str(&mut self, text: &str, origin: &Path) -> Result<(), ConfigError> {
        let table: toml::Table = text.parse().map_err(|err: toml::de::Error| {
            let (line, column) = err
                .span()
                .map_or((1, 1), |span| line_column(text, span.start));
            ConfigError::Toml {
                path: origin.to_owned(),
                source: TomlError::new(line, column, err),
            }
        })?;
        let in_file = |source: ConfigError| ConfigError::InFile {
            path: origin.to_owned(),
            source: Box::new(source),
        };
        let json = serde_json::to_value(&table).map_err(|e| {
            in_file(ConfigError::Decode {
                what: "TOML values".to_owned(),
                source: e,
            })
        })?;
        let Value::Object(map) = json else {
            return Ok(());
        };
        // Load into a copy so that a file with an error leaves the options as they were.
        let mut loaded = self.clone();
        // Each write (and preset) keeps the file and the line of its key, for the diagnostics.
        let located = Locator::File {
            path: origin.to_owned(),
            keys: std::sync::Arc::new(crate::locator::toml_key_lines(text)),
        };
        if let Some(presets) = map.get("presets") {
            loaded.load_presets(presets, &located).map_err(in_file)?;
        }
        loaded.locate_writes(located);
        for (key, value) in map {
            if crate::sections::HOST_SECTIONS.contains(&key.as_str()) {
                loaded.merge_section(&key, value, origin);
            } else if key != "presets" {
                loaded.set(Layer::Setup, &key, value).map_err(in_file)?;
            }
        }
        loaded.locate_writes(Locator::Layer);
        *self = loaded;
        Ok(())
    }

    fn load_presets(&mut self, presets: &Value, located: &Locator) -> Result<(), ConfigError> {
        let Value::Object(presets) = presets else {
            return Err(ConfigError::InvalidPreset {
                name: "presets".to_owned(),
                reason: "expected a table of presets".to_owned(),
            });
        };
        for (name, value) in presets {
            let preset: Preset =
                serde_json::from_value(value.clone()).map_err(|source| ConfigError::Decode {
                    what: format!("preset {name:?}"),
                    source,
                })?;
            self.presets_mut().insert(name.clone(), preset)?;
            let written = crate::path::join("presets", name);
            self.set_preset_origin(name, located.origin(Layer::Setup, &written));
        }
        Ok(())
    }

    /// Evaluates a conversation's frontmatter into the FRONTMATTER layer (cleared first) and
    /// returns its template variables.
    ///
    /// `json`: the `"flemma"` key holds options, every other key is a template variable. `lua`
    /// (with the `lua` feature): `flemma.opt` writes options. `first_line` is the transcript
    /// line of the first code line, so errors point into the transcript.
    ///
    /// ```
    /// use flemma_config::{Config, Layer};
    ///
    /// let mut config = Config::new();
    /// let vars = config.apply_frontmatter(
    ///     "json",
    ///     r#"{"flemma": {"tools": {"auto_approve": ["+bash"], "max_concurrent": 4}}, "name": "Ada"}"#,
    ///     2,
    /// )?;
    /// assert_eq!(vars["name"], "Ada");
    /// assert!(config.list("tools.auto_approve").items.contains(&"bash".to_owned()));
    /// assert!(config.layer_has_op(Layer::Frontmatter, flemma_config::OpKind::Append, "tools.auto_approve", Some("bash")));
    /// # Ok::<(), flemma_config::FrontmatterError>(())
    /// ```
    ///
    /// Each write keeps its transcript line ([`Origin::Frontmatter`](crate::Origin)), so
    /// that [`Config::diagnostics`] can say where a misspelled tool name was written: for Lua
    /// the line of the statement, for JSON the line of the option's key (else the line of the
    /// `"flemma"` key).
    ///
    /// # Errors
    ///
    /// [`FrontmatterError`] with the transcript line: invalid JSON or Lua, an unknown option, a
    /// wrong type, an unsupported language. The FRONTMATTER layer is left empty then.
    pub fn apply_frontmatter(
        &mut self,
        language: &str,
        code: &str,
        first_line: u32,
    ) -> Result<Map<String, Value>, FrontmatterError> {
        self.clear_layer(Layer::Frontmatter);
        let result = match language {
            "json" => self.apply_json_frontmatter(code, first_line),
            #[cfg(feature = "lua")]
            "lua" => crate::lua::apply(self, code, first_line),
            #[cfg(not(feature = "lua"))]
            "lua" => Err(FrontmatterError::new(
                first_line,
                "Lua frontmatter needs flemma built with the `lua` feature",
            )),
            other => Err(FrontmatterError::new(
                first_line.saturating_sub(1),
                format!("unsupported frontmatter language `{other}` (json and lua are)"),
            )),
        };
        self.locate_writes(Locator::Layer);
        if result.is_err() {
            self.clear_layer(Layer::Frontmatter);
        }
        result
    }

    fn apply_json_frontmatter(
        &mut self,
        code: &str,
        first_line: u32,
    ) -> Result<Map<String, Value>, FrontmatterError> {
        let value: Value = serde_json::from_str(code).map_err(|e| {
            FrontmatterError::with_source(
                first_line + e.line().saturating_sub(1) as u32,
                "invalid JSON frontmatter",
                e,
            )
        })?;
        let Value::Object(mut variables) = value else {
            return Err(FrontmatterError::new(
                first_line,
                "JSON frontmatter must be an object",
            ));
        };
        if !variables.contains_key("flemma") {
            // `{"tools": [...]}` sets a template variable; the user likely meant an option.
            self.stray_option = variables
                .keys()
                .find(|key| crate::schema::resolve_path(key, false).is_ok())
                .map(|key| {
                    let quoted = format!("\"{key}\"");
                    let line = code
                        .lines()
                        .position(|l| l.contains(&quoted))
                        .map_or(first_line, |i| first_line + i as u32);
                    (key.clone(), line)
                });
        }
        if let Some(options) = variables.shift_remove("flemma") {
            let line = code
                .lines()
                .position(|l| l.contains("\"flemma\""))
                .map_or(first_line, |i| first_line + i as u32);
            let Value::Object(options) = options else {
                return Err(FrontmatterError::new(
                    line,
                    "the \"flemma\" key must hold an object of options",
                ));
            };
            self.locate_writes(Locator::Frontmatter {
                keys: std::sync::Arc::new(crate::locator::json_key_lines(
                    code,
                    first_line,
                    (line - first_line) as usize,
                    &options,
                )),
                fallback: line,
            });
            for (key, value) in options {
                self.set(Layer::Frontmatter, &key, value).map_err(|e| {
                    let line =
                        key_line(code, &e, line - first_line).map_or(line, |i| first_line + i);
                    FrontmatterError::with_source(line, INVALID_OPTION, e)
                })?;
            }
        }
        Ok(variables)
    }
}

/// The 0-based code line of the key an option error is about: the first line, from the
/// `"flemma"` key's line `from` on, that holds the option's last path segment as a JSON key
/// (`"max_concurrent"`, or the tail of a dotted key `"tools.max_concurrent"`).
fn key_line(code: &str, error: &ConfigError, from: u32) -> Option<u32> {
    let (ConfigError::UnknownOption { path, .. }
    | ConfigError::Type { path, .. }
    | ConfigError::InvalidListItem { path, .. }
    | ConfigError::NotAList { path }
    | ConfigError::Unsupported { path, .. }) = error
    else {
        return None;
    };
    let leaf = path.rsplit('.').next()?;
    let quoted = format!("\"{leaf}\"");
    let dotted = format!(".{leaf}\"");
    code.lines()
        .enumerate()
        .skip(from as usize)
        .find(|(_, l)| l.contains(&quoted) || l.contains(&dotted))
        .map(|(i, _)| i as u32)
}

/// 1-based line and column of a byte offset.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}
