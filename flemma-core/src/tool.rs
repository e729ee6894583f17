//! The [`Tool`] trait and the closure adapters that make a simple tool one expression.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;

use crate::ExecutionContext;
use crate::ToolDefinition;
use crate::ToolOutput;
use crate::preview::Preview;

/// A tool the model can call.
///
/// `execute` gets the call's input (harness parameters removed) and its
/// [`ExecutionContext`]; whatever it returns is what the model sees. A tool that runs long
/// should watch [`ExecutionContext::cancellation`]: cancel and timeout both end a call with a
/// result, never silently. Blocking work (large file reads, CPU-heavy parsing) belongs in
/// `tokio::task::spawn_blocking`, so other calls keep running.
///
/// Synchronous tools (the definition's default) are the same trait: they run within the
/// cycle and cannot be sent to the background.
///
/// ```
/// use async_trait::async_trait;
/// use flemma_core::{ExecutionContext, Tool, ToolDefinition, ToolOutput};
/// use flemma_schema::dsl::{object, string};
///
/// struct Shout {
///     definition: ToolDefinition,
/// }
///
/// #[async_trait]
/// impl Tool for Shout {
///     fn definition(&self) -> &ToolDefinition {
///         &self.definition
///     }
///
///     async fn execute(&self, input: serde_json::Value, _ctx: &ExecutionContext) -> ToolOutput {
///         match input["text"].as_str() {
///             Some(text) => ToolOutput::text(text.to_uppercase()),
///             None => ToolOutput::error("No text provided"),
///         }
///     }
/// }
///
/// let shout = Shout {
///     definition: ToolDefinition::builder("shout", "Repeat text in capitals.")?
///         .input(object([("text", string())]))
///         .build()?,
/// };
/// # let _ = shout;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[async_trait::async_trait]
pub trait Tool: Send + Sync + 'static {
    /// The tool's definition.
    fn definition(&self) -> &ToolDefinition;

    /// Runs one call.
    async fn execute(&self, input: Value, ctx: &ExecutionContext) -> ToolOutput;

    /// What a pending placeholder shows about a call; `None` uses the generic preview. `max_len` is
    /// the width available after `<name>: `.
    fn preview(&self, input: &Value, max_len: usize) -> Option<Preview> {
        let _ = (input, max_len);
        None
    }

    /// How the tool runs detached from the host when a call goes to the background, so the
    /// job survives the host (see `flemma_runtime::jobs`); `None` (the default) runs background
    /// calls in the host's runtime, where they end with it.
    fn detach(&self) -> Option<&dyn crate::Detach> {
        None
    }

    /// How long a call may run in the foreground: the executor gives up on a call that is
    /// still running a few seconds after this (a tool that times itself out, as `bash` does,
    /// reports first) and answers it with `Tool timed out after <n> seconds.`, so a stuck
    /// tool never holds a cycle. The default is the context's timeout
    /// (`tools.default_timeout`); `None` lets calls run until they end or are cancelled.
    fn time_limit(&self, input: &Value, ctx: &ExecutionContext) -> Option<std::time::Duration> {
        let _ = input;
        Some(ctx.timeout())
    }
}

type BoxFuture = Pin<Box<dyn Future<Output = ToolOutput> + Send + 'static>>;

/// A tool made of a definition and a closure; see [`tool_fn`] and [`async_tool_fn`].
pub struct FnTool {
    definition: ToolDefinition,
    run: Arc<dyn Fn(Value, ExecutionContext) -> BoxFuture + Send + Sync>,
}

impl fmt::Debug for FnTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FnTool")
            .field("name", self.definition.name())
            .finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl Tool for FnTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn execute(&self, input: Value, ctx: &ExecutionContext) -> ToolOutput {
        (self.run)(input, ctx.clone()).await
    }
}

/// A tool from a closure that answers at once.
///
/// ```
/// use flemma_core::{ToolDefinition, ToolOutput, tool_fn};
///
/// let now = tool_fn(ToolDefinition::builder("now", "The current Unix time.")?.build()?, |_input, _ctx| {
///     let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs());
///     ToolOutput::from(secs.map(|s| s.to_string()))
/// });
/// # let _ = now;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn tool_fn<F, O>(definition: ToolDefinition, f: F) -> FnTool
where
    F: Fn(Value, &ExecutionContext) -> O + Send + Sync + 'static,
    O: Into<ToolOutput>,
{
    FnTool {
        definition,
        run: Arc::new(move |input, ctx| {
            let output = f(input, &ctx).into();
            Box::pin(std::future::ready(output))
        }),
    }
}

/// A tool from an async closure. The closure gets the context by value (it is a cheap
/// handle), so the future it returns can own it.
///
/// ```
/// use flemma_core::{ToolDefinition, ToolOutput, async_tool_fn};
///
/// let wait = async_tool_fn(
///     ToolDefinition::builder("wait", "Wait a moment.")?.asynchronous(true).build()?,
///     |_input, ctx| async move {
///         tokio::select! {
///             () = tokio::time::sleep(std::time::Duration::from_millis(10)) => ToolOutput::text("waited"),
///             () = ctx.cancellation().cancelled() => ToolOutput::error("cancelled"),
///         }
///     },
/// );
/// # let _ = wait;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn async_tool_fn<F, Fut, O>(definition: ToolDefinition, f: F) -> FnTool
where
    F: Fn(Value, ExecutionContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = O> + Send + 'static,
    O: Into<ToolOutput>,
{
    let f = Arc::new(f);
    FnTool {
        definition,
        run: Arc::new(move |input, ctx| {
            let future = f(input, ctx);
            Box::pin(async move { future.await.into() })
        }),
    }
}

#[cfg(feature = "typed")]
/// A tool whose closure receives its input decoded into `T`; the schema comes from `T`
/// (schemars, compiled to the strict form). Input that does not decode becomes an error
/// result with flemma-schema's message, never a panic.
///
/// ```
/// use flemma_core::{ToolDefinition, ToolOutput, typed_tool_fn};
///
/// /// Adds two numbers.
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Add {
///     /// The first number
///     a: f64,
///     /// The second number
///     b: f64,
/// }
///
/// let add = typed_tool_fn(
///     ToolDefinition::builder("add", "Add two numbers.")?,
///     |input: Add, _ctx| async move { ToolOutput::text((input.a + input.b).to_string()) },
/// )?;
/// assert!(add.definition().spec().strict);
/// # use flemma_core::Tool;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
///
/// [`flemma_schema::SchemaError`] when `T`'s schema cannot be made strict.
pub fn typed_tool_fn<T, F, Fut, O>(
    builder: crate::ToolDefinitionBuilder,
    f: F,
) -> Result<FnTool, flemma_schema::SchemaError>
where
    T: serde::de::DeserializeOwned + schemars::JsonSchema + Send + 'static,
    F: Fn(T, ExecutionContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = O> + Send + 'static,
    O: Into<ToolOutput>,
{
    let schema = flemma_schema::strict_schema_for::<T>(flemma_schema::Dialect::OpenAiResponses)?;
    let definition = builder.input(schema.clone()).strict(true).build()?;
    // Inputs are checked against the tool's own schema first, so the model reads which field
    // is wrong (`input.a: expected number, got string "2"`), not a deserializer's message.
    let validator = flemma_schema::Validator::new(schema.schema())?;
    let f = Arc::new(f);
    Ok(FnTool {
        definition,
        run: Arc::new(move |input, ctx| {
            if let Err(error) = validator.validate(&input) {
                return Box::pin(std::future::ready(ToolOutput::error(error.to_string())));
            }
            match flemma_schema::decode_input::<T>(&schema, input) {
                Ok(value) => {
                    let future = f(value, ctx);
                    Box::pin(async move { future.await.into() })
                }
                Err(error) => Box::pin(std::future::ready(ToolOutput::error(error.to_string()))),
            }
        }),
    })
}

/// An `Arc<T>` or a `Box<T>` of a [`Tool`] (`T` may be unsized, `dyn Tool` included) is a
/// tool too, so a host can keep a handle on what it registers.
macro_rules! shared_tool {
    ($ptr:ident) => {
        #[async_trait::async_trait]
        impl<T: Tool + ?Sized> Tool for $ptr<T> {
            fn definition(&self) -> &ToolDefinition {
                (**self).definition()
            }

            async fn execute(&self, input: Value, ctx: &ExecutionContext) -> ToolOutput {
                (**self).execute(input, ctx).await
            }

            fn preview(&self, input: &Value, max_len: usize) -> Option<Preview> {
                (**self).preview(input, max_len)
            }

            fn detach(&self) -> Option<&dyn crate::Detach> {
                (**self).detach()
            }

            fn time_limit(
                &self,
                input: &Value,
                ctx: &ExecutionContext,
            ) -> Option<std::time::Duration> {
                (**self).time_limit(input, ctx)
            }
        }
    };
}

shared_tool!(Arc);
shared_tool!(Box);
