//! [`ConfigBuilder`]: the SETUP layer written in code, checked once.

use flemma_ids::ToolName;
use serde_json::Value;

use super::{AutoApprovePolicy, Config, PolicyDecision};
use crate::error::ConfigError;
use crate::layer::Layer;
use crate::listops::ListOp;

/// Builds the SETUP layer of a [`Config`] in code; every write is checked once, in
/// [`build`](ConfigBuilder::build).
///
/// ```
/// use flemma_config::{Config, PolicyDecision};
///
/// let config = Config::builder()
///     .set("tools.max_concurrent", 4)
///     .append("tools.auto_approve", "bash")
///     .remove("tools.auto_approve", "write")
///     .auto_approve_policy(|tool, _input| {
///         if tool == "deploy" { PolicyDecision::Deny(None) } else { PolicyDecision::Pass }
///     })
///     .build()?;
/// let options = config.options()?;
/// assert_eq!(options.tools.max_concurrent, 4);
/// assert!(options.tools.auto_approve.contains(&"bash".to_owned()));
/// assert!(!options.tools.auto_approve.contains(&"write".to_owned()));
///
/// let typo = Config::builder().set("tools.max_concurent", 4).build();
/// assert!(typo.unwrap_err().to_string().contains("did you mean `tools.max_concurrent`"));
/// # Ok::<(), flemma_config::ConfigError>(())
/// ```
#[derive(Debug, Default)]
#[must_use]
pub struct ConfigBuilder {
    writes: Vec<BuilderWrite>,
    presets: Vec<(String, crate::presets::Preset)>,
    policy: Option<AutoApprovePolicy>,
}

#[derive(Debug)]
enum BuilderWrite {
    Set(String, Value),
    Op(String, ListOp),
}

impl Config {
    /// Starts building a configuration's SETUP layer.
    pub fn builder() -> ConfigBuilder {
        ConfigBuilder::default()
    }
}

impl ConfigBuilder {
    /// Sets an option (see [`Config::set`]).
    pub fn set(mut self, path: &str, value: impl Into<Value>) -> Self {
        self.writes
            .push(BuilderWrite::Set(path.to_owned(), value.into()));
        self
    }

    /// Appends to a list option.
    pub fn append(mut self, path: &str, item: &str) -> Self {
        self.writes.push(BuilderWrite::Op(
            path.to_owned(),
            ListOp::Append(item.to_owned()),
        ));
        self
    }

    /// Prepends to a list option.
    pub fn prepend(mut self, path: &str, item: &str) -> Self {
        self.writes.push(BuilderWrite::Op(
            path.to_owned(),
            ListOp::Prepend(item.to_owned()),
        ));
        self
    }

    /// Removes from a list option.
    pub fn remove(mut self, path: &str, item: &str) -> Self {
        self.writes.push(BuilderWrite::Op(
            path.to_owned(),
            ListOp::Remove(item.to_owned()),
        ));
        self
    }

    /// Adds or overrides a preset.
    pub fn preset(mut self, name: &str, preset: crate::presets::Preset) -> Self {
        self.presets.push((name.to_owned(), preset));
        self
    }

    /// Sets the closure policy for `tools.auto_approve`.
    pub fn auto_approve_policy(
        mut self,
        f: impl Fn(&ToolName, &Value) -> PolicyDecision + Send + Sync + 'static,
    ) -> Self {
        self.policy = Some(AutoApprovePolicy::new(f));
        self
    }

    /// Checks every write and produces the configuration.
    ///
    /// # Errors
    ///
    /// The first invalid write: [`ConfigError::UnknownOption`], [`ConfigError::Type`],
    /// [`ConfigError::InvalidListItem`], [`ConfigError::NotAList`] or
    /// [`ConfigError::InvalidPreset`].
    pub fn build(self) -> Result<Config, ConfigError> {
        let mut config = Config::new();
        for (name, preset) in self.presets {
            config.presets_mut().insert(name, preset)?;
        }
        for write in self.writes {
            match write {
                BuilderWrite::Set(path, value) => config.set(Layer::Setup, &path, value)?,
                BuilderWrite::Op(path, op) => config.list_op(Layer::Setup, &path, op)?,
            }
        }
        config.set_auto_approve_policy(self.policy);
        Ok(config)
    }
}
