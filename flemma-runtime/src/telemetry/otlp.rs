//! The spans exported over OTLP (HTTP/protobuf) with the OpenTelemetry SDK (feature `otel`).

use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::registry::LookupSpan;

/// The export timeout when `OTEL_EXPORTER_OTLP_TIMEOUT` does not set one (the SDK's default).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the spans cannot be exported as the `OTEL_*` variables ask.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OtlpError {
    /// `OTEL_TRACES_EXPORTER` names an exporter other than `otlp` or `none`.
    #[error("OTEL_TRACES_EXPORTER={0:?}: only otlp and none are supported")]
    UnsupportedExporter(String),
    /// `OTEL_EXPORTER_OTLP_PROTOCOL` (or its traces variant) is not `http/protobuf`.
    #[error("{variable}={value:?}: only http/protobuf is supported")]
    UnsupportedProtocol {
        /// The variable.
        variable: &'static str,
        /// Its value.
        value: String,
    },
    /// A variable holds a value that is not understood.
    #[error("{variable}={value:?} is not understood")]
    Invalid {
        /// The variable.
        variable: &'static str,
        /// Its value.
        value: String,
    },
    /// The HTTP client could not be built.
    #[error("the OTLP exporter's HTTP client cannot be built")]
    Client(#[source] reqwest::Error),
    /// The OpenTelemetry SDK refused the configuration (an endpoint that is not a URL, ...).
    #[error("the OTLP exporter cannot be built")]
    Build(#[source] opentelemetry_otlp::ExporterBuildError),
    /// The last spans could not be delivered when the export ended.
    #[error("the OTLP export did not end cleanly")]
    Shutdown(#[source] opentelemetry_sdk::error::OTelSdkError),
}

/// The spans of this crate ([`TARGET`](super::TARGET)) exported over OTLP (HTTP/protobuf), as
/// the standard `OTEL_*` environment variables configure it.
///
/// [`Otlp::from_env`] reads the variables; [`Otlp::layer`] is the `tracing-subscriber` layer
/// to add to the host's subscriber; [`Otlp::shutdown`] sends what is still queued (call it
/// before the process exits: spans are sent in batches, every `OTEL_BSP_SCHEDULE_DELAY`
/// milliseconds, 5,000 by default).
///
/// ```no_run
/// use flemma_runtime::telemetry::Otlp;
/// use tracing_subscriber::prelude::*;
///
/// # fn main() -> Result<(), flemma_runtime::telemetry::OtlpError> {
/// let otlp = Otlp::from_env("my-host")?;
/// tracing_subscriber::registry()
///     .with(otlp.as_ref().map(Otlp::layer))
///     .init();
/// // ... run sessions ...
/// if let Some(otlp) = otlp {
///     otlp.shutdown()?;
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Otlp {
    provider: SdkTracerProvider,
}

impl Otlp {
    /// The export the `OTEL_*` variables ask for, `None` when they ask for none.
    ///
    /// An export is asked for by `OTEL_EXPORTER_OTLP_ENDPOINT` or
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (`http://collector:4318`; `/v1/traces` is added to
    /// the first), or by `OTEL_TRACES_EXPORTER=otlp` (to the default
    /// `http://localhost:4318/v1/traces`). Unlike the OpenTelemetry SDKs, nothing is exported
    /// when no variable asks: a host built with the feature does not dial `localhost:4318` on
    /// every run. `OTEL_SDK_DISABLED=true` and `OTEL_TRACES_EXPORTER=none` turn the export
    /// off. The exporter honours `OTEL_EXPORTER_OTLP_[TRACES_]HEADERS`, `..._TIMEOUT` and
    /// `..._COMPRESSION` (none), the batch processor `OTEL_BSP_*`, the resource
    /// `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES`; `service` is the service name when
    /// neither of those names one. TLS is rustls with the Mozilla roots.
    ///
    /// # Errors
    ///
    /// [`OtlpError::UnsupportedExporter`], [`OtlpError::UnsupportedProtocol`] (`grpc` and
    /// `http/json` are not built), [`OtlpError::Invalid`] for a timeout that is not a number,
    /// [`OtlpError::Client`] and [`OtlpError::Build`] (an endpoint that is not a URL).
    pub fn from_env(service: &str) -> Result<Option<Self>, OtlpError> {
        let Some(plan) = plan(|name| std::env::var(name).ok())? else {
            return Ok(None);
        };
        let client = blocking_client(plan.timeout)?;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_timeout(plan.timeout)
            .with_http_client(client)
            .build()
            .map_err(OtlpError::Build)?;
        let mut resource = Resource::builder();
        if !plan.named {
            resource = resource.with_service_name(service.to_owned());
        }
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource.build())
            .build();
        Ok(Some(Self { provider }))
    }

    /// The layer that hands the spans on [`TARGET`](super::TARGET) at `INFO` and above to
    /// the exporter (the spans of other crates, and events, are not exported).
    pub fn layer<S>(&self) -> impl Layer<S> + Send + Sync + 'static
    where
        S: tracing::Subscriber + for<'span> LookupSpan<'span> + Send + Sync,
    {
        let tracer = self.provider.tracer("flemma");
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_location(false)
            .with_threads(false)
            .with_filter(Targets::new().with_target(super::TARGET, LevelFilter::INFO))
    }

    /// Sends the spans still queued and stops the exporter's thread.
    ///
    /// # Errors
    ///
    /// [`OtlpError::Shutdown`] when the last batch could not be delivered (the collector is
    /// down, the timeout ran out).
    pub fn shutdown(self) -> Result<(), OtlpError> {
        self.provider.shutdown().map_err(OtlpError::Shutdown)
    }
}

/// What the variables ask for, once they ask for an export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Plan {
    /// The exporter's timeout.
    timeout: Duration,
    /// `OTEL_SERVICE_NAME` or `OTEL_RESOURCE_ATTRIBUTES` names the service.
    named: bool,
}

/// Reads the variables through `var` (unset and empty are alike).
fn plan(var: impl Fn(&str) -> Option<String>) -> Result<Option<Plan>, OtlpError> {
    let var = |name: &str| var(name).filter(|value| !value.trim().is_empty());
    if var("OTEL_SDK_DISABLED").is_some_and(|value| value.trim().eq_ignore_ascii_case("true")) {
        return Ok(None);
    }
    let asked = match var("OTEL_TRACES_EXPORTER") {
        Some(value) => {
            let mut otlp = false;
            for exporter in value.split(',').map(str::trim) {
                match exporter.to_ascii_lowercase().as_str() {
                    "otlp" => otlp = true,
                    "none" => return Ok(None),
                    _ => return Err(OtlpError::UnsupportedExporter(value)),
                }
            }
            otlp
        }
        None => {
            var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some()
                || var("OTEL_EXPORTER_OTLP_ENDPOINT").is_some()
        }
    };
    if !asked {
        return Ok(None);
    }
    for variable in [
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
    ] {
        if let Some(value) = var(variable) {
            if value.trim() != "http/protobuf" {
                return Err(OtlpError::UnsupportedProtocol { variable, value });
            }
            break;
        }
    }
    let mut timeout = DEFAULT_TIMEOUT;
    for variable in [
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
        "OTEL_EXPORTER_OTLP_TIMEOUT",
    ] {
        if let Some(value) = var(variable) {
            let millis = value
                .trim()
                .parse::<u64>()
                .map_err(|_| OtlpError::Invalid { variable, value })?;
            timeout = Duration::from_millis(millis);
            break;
        }
    }
    let named = var("OTEL_SERVICE_NAME").is_some()
        || var("OTEL_RESOURCE_ATTRIBUTES").is_some_and(|attributes| {
            attributes
                .split(',')
                .any(|pair| pair.split('=').next().map(str::trim) == Some("service.name"))
        });
    Ok(Some(Plan { timeout, named }))
}

/// reqwest's blocking client (the SDK's batch thread has no async runtime), on rustls with
/// the Mozilla roots. Built on a thread of its own: a blocking client cannot be built inside
/// an async runtime, and a host may call [`Otlp::from_env`] from one.
fn blocking_client(timeout: Duration) -> Result<reqwest::blocking::Client, OtlpError> {
    // reqwest is built without a default provider; another provider installed first wins.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let build = move || {
        let roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        let tls = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        reqwest::blocking::Client::builder()
            .tls_backend_preconfigured(tls)
            .timeout(timeout)
            .build()
            .map_err(OtlpError::Client)
    };
    match std::thread::Builder::new()
        .name("flemma-otlp-client".into())
        .spawn(build)
    {
        Ok(thread) => thread
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
        // No thread to spare: build here (this fails only inside an async runtime).
        Err(_) => build(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan_of(vars: &[(&str, &str)]) -> Result<Option<Plan>, OtlpError> {
        plan(|name| {
            vars.iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        })
    }

    #[test]
    fn nothing_is_exported_unless_a_variable_asks() {
        assert!(plan_of(&[]).unwrap().is_none());
        assert!(plan_of(&[("OTEL_SERVICE_NAME", "x")]).unwrap().is_none());
        assert!(
            plan_of(&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")])
                .unwrap()
                .is_none()
        );
        let asked = Plan {
            timeout: DEFAULT_TIMEOUT,
            named: false,
        };
        for vars in [
            [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")],
            [("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c/v1/traces")],
            [("OTEL_TRACES_EXPORTER", "otlp")],
        ] {
            assert_eq!(plan_of(&vars).unwrap(), Some(asked), "{vars:?}");
        }
    }

    #[test]
    fn disabled_and_none_win_over_an_endpoint() {
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318");
        assert!(
            plan_of(&[endpoint, ("OTEL_SDK_DISABLED", "TRUE")])
                .unwrap()
                .is_none()
        );
        assert!(
            plan_of(&[endpoint, ("OTEL_TRACES_EXPORTER", "otlp,none")])
                .unwrap()
                .is_none()
        );
        assert!(
            plan_of(&[endpoint, ("OTEL_SDK_DISABLED", "false")])
                .unwrap()
                .is_some()
        );
    }

    #[test]
    fn other_exporters_and_protocols_are_errors() {
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317");
        assert!(matches!(
            plan_of(&[("OTEL_TRACES_EXPORTER", "zipkin")]),
            Err(OtlpError::UnsupportedExporter(value)) if value == "zipkin"
        ));
        assert!(matches!(
            plan_of(&[endpoint, ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]),
            Err(OtlpError::UnsupportedProtocol {
                variable: "OTEL_EXPORTER_OTLP_PROTOCOL",
                ..
            })
        ));
        // The traces variable is read first.
        assert!(
            plan_of(&[
                endpoint,
                ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ])
            .unwrap()
            .is_some()
        );
    }

    #[test]
    fn timeout_and_service_name() {
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318");
        let plan = plan_of(&[
            endpoint,
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "250"),
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "deployment.environment=ci, service.name=w",
            ),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(plan.timeout, Duration::from_millis(250));
        assert!(plan.named);
        assert!(matches!(
            plan_of(&[endpoint, ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "10s")]),
            Err(OtlpError::Invalid {
                variable: "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
                ..
            })
        ));
    }
}
