//! The `tern` process's tracing: human-readable logs on standard error
//! (`TERN_LOG`), and, with the `otel` feature and `OTEL_EXPORTER_OTLP_ENDPOINT`
//! set, the engine's spans (one `leg` span per leg: call id, round, method,
//! target, outcome; a `task` span per task runner; the gateway's `upstream`
//! span per request it sends) and tern's counters (`tern_server::metrics`,
//! `tern_gateway::metrics`) exported over OTLP/HTTP. The resource names
//! the service (`OTEL_SERVICE_NAME`, default `tern`) and the replica
//! (`service.instance.id` from `TERN_REPLICA`, default `HOST-PID`), so a
//! fleet's traces and counters tell replicas apart.

use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// Keeps the exporters alive; dropping it flushes them.
#[derive(Debug, Default)]
pub struct Telemetry {
    #[cfg(feature = "otel")]
    #[allow(dead_code, reason = "held for its Drop, which flushes the exporters")]
    otel: Option<otel::Export>,
}

/// `TERN_LOG`: a comma-separated list of `level` and `target=level`
/// directives (tracing's `Targets` syntax), empty ones skipped (`Targets`
/// would read an empty directive as "every target, at TRACE"); unset or
/// empty gives the default, unreadable the default with a warning.
fn log_filter() -> Targets {
    log_filter_of(std::env::var("TERN_LOG").ok().as_deref())
}

/// [`log_filter`] of `TERN_LOG`'s value.
fn log_filter_of(given: Option<&str>) -> Targets {
    let default = || {
        Targets::new()
            .with_default(tracing::Level::WARN)
            // A stdio server kept running past its input is killed, and
            // that is said in tern's own error when it matters.
            .with_target("tern_client::transport::stdio", tracing::Level::ERROR)
    };
    let Some(given) = given else {
        return default();
    };
    let directives: Vec<&str> = given
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .collect();
    if directives.is_empty() {
        return default();
    }
    directives.join(",").parse().unwrap_or_else(|e| {
        eprintln!("tern: TERN_LOG is not read ({e}); logging warnings only");
        default()
    })
}

/// Standard error for log lines, each made safe ([`crate::safe::text`]): a
/// log line may quote a peer (a stdio server's standard error is logged at
/// info), and tracing escapes C0 and C1 controls but not bidi or
/// zero-width characters.
struct SafeStderr;

impl std::io::Write for SafeStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // tracing formats a whole event into one buffer and writes it once.
        let text = String::from_utf8_lossy(buf);
        std::io::stderr().write_all(crate::safe::text(&text).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// Installs the process's subscriber. Logs go to standard error: standard
/// output carries protocol only. They are not coloured: every line passes
/// [`crate::safe::text`], which shows escapes instead of running them.
pub fn init() -> Telemetry {
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(|| SafeStderr)
        // A closed standard error must not break requests: tracing's own
        // report of a failed write would panic in `eprintln!` (found when a
        // log line met a closed pipe and the request's connection died).
        .log_internal_errors(false)
        .with_ansi(false)
        .with_filter(log_filter());
    #[cfg(feature = "otel")]
    {
        let started =
            std::env::var_os("OTEL_EXPORTER_OTLP_ENDPOINT").map(|_| otel::Export::start());
        let (export, layers, failed) = match started {
            Some(Ok((export, layers))) => (Some(export), Some(layers), None),
            Some(Err(e)) => (None, None, Some(e)),
            None => (None, None, None),
        };
        tracing_subscriber::registry()
            .with(logs)
            .with(layers)
            .init();
        if let Some(e) = failed {
            tracing::warn!(error = %e, "OpenTelemetry export not started");
        }
        Telemetry { otel: export }
    }
    #[cfg(not(feature = "otel"))]
    {
        tracing_subscriber::registry().with(logs).init();
        Telemetry::default()
    }
}

#[cfg(feature = "otel")]
mod otel {
    use opentelemetry::KeyValue;
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
    use opentelemetry_otlp::WithHttpConfig as _;
    use opentelemetry_sdk::Resource;
    use opentelemetry_sdk::metrics::SdkMeterProvider;
    use opentelemetry_sdk::metrics::periodic_reader_with_async_runtime::PeriodicReader;
    use opentelemetry_sdk::runtime::Tokio;
    use opentelemetry_sdk::trace::SdkTracerProvider;
    use opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor;
    use tracing_subscriber::Layer;
    use tracing_subscriber::filter::Targets;

    use http_body_util::{BodyExt as _, Full, Limited};
    use hyper_util::client::legacy::Client;
    use hyper_util::client::legacy::connect::HttpConnector;
    use hyper_util::rt::TokioExecutor;

    /// The exporters' HTTP/1.1 client (hyper), 10 s per export, answers
    /// read up to 1 MiB.
    #[derive(Debug, Clone)]
    struct Http1(Client<HttpConnector, Full<Bytes>>);

    impl Http1 {
        fn new() -> Self {
            Self(Client::builder(TokioExecutor::new()).build_http())
        }
    }

    impl HttpClient for Http1 {
        fn send_bytes<'life0, 'async_trait>(
            &'life0 self,
            request: Request<Bytes>,
        ) -> std::pin::Pin<
            Box<dyn Future<Output = Result<Response<Bytes>, HttpError>> + Send + 'async_trait>,
        >
        where
            'life0: 'async_trait,
            Self: 'async_trait,
        {
            let client = self.0.clone();
            Box::pin(async move {
                let request = request.map(Full::new);
                let exchange = async {
                    let response = client.request(request).await?;
                    let (parts, body) = response.into_parts();
                    let body = Limited::new(body, 1 << 20).collect().await?.to_bytes();
                    Ok::<_, HttpError>(Response::from_parts(parts, body))
                };
                tokio::time::timeout(std::time::Duration::from_secs(10), exchange)
                    .await
                    .map_err(|_| HttpError::from("OTLP export timed out"))?
            })
        }
    }

    /// The exporters and the runtime their batches are sent from.
    pub(super) struct Export {
        traces: SdkTracerProvider,
        metrics: SdkMeterProvider,
        runtime: Option<tokio::runtime::Runtime>,
    }

    impl std::fmt::Debug for Export {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("Export").finish_non_exhaustive()
        }
    }

    fn replica() -> String {
        std::env::var("TERN_REPLICA").unwrap_or_else(|_| {
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map_or_else(|_| "host".to_owned(), |h| h.trim().to_owned());
            format!("{host}-{}", std::process::id())
        })
    }

    impl Export {
        pub(super) fn start<S>()
        -> Result<(Self, impl Layer<S> + Send + Sync), Box<dyn std::error::Error>>
        where
            S: tracing::Subscriber
                + for<'a> tracing_subscriber::registry::LookupSpan<'a>
                + Send
                + Sync,
        {
            // Batches leave from a runtime of their own: the subscriber is
            // installed before the command's runtime exists.
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("tern-otel")
                .enable_all()
                .build()?;
            let entered = runtime.enter();
            let service = std::env::var("OTEL_SERVICE_NAME").unwrap_or_else(|_| "tern".to_owned());
            let resource = Resource::builder()
                .with_service_name(service)
                .with_attribute(KeyValue::new("service.instance.id", replica()))
                .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
                .build();
            let spans = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_http_client(Http1::new())
                .build()?;
            let traces = SdkTracerProvider::builder()
                .with_resource(resource.clone())
                .with_span_processor(BatchSpanProcessor::builder(spans, Tokio).build())
                .build();
            let counters = opentelemetry_otlp::MetricExporter::builder()
                .with_http()
                .with_http_client(Http1::new())
                .build()?;
            let metrics = SdkMeterProvider::builder()
                .with_resource(resource)
                .with_reader(PeriodicReader::builder(counters, Tokio).build())
                .build();
            let sdk_tracer = traces.tracer("tern");
            // The engine's spans and events, and the counters' events.
            let span_layer = tracing_opentelemetry::layer()
                .with_tracer(sdk_tracer)
                .with_filter(
                    Targets::new()
                        .with_target("tern_server", tracing::Level::INFO)
                        .with_target("tern_gateway", tracing::Level::INFO),
                );
            let metrics_layer = tracing_opentelemetry::MetricsLayer::new(metrics.clone())
                .with_filter(
                    Targets::new()
                        .with_target("tern_server::metrics", tracing::Level::DEBUG)
                        .with_target("tern_gateway::metrics", tracing::Level::DEBUG),
                );
            let layers = span_layer.and_then(metrics_layer);
            drop(entered);
            Ok((
                Self {
                    traces,
                    metrics,
                    runtime: Some(runtime),
                },
                layers,
            ))
        }
    }

    impl Drop for Export {
        fn drop(&mut self) {
            // Flush what is batched, then stop the runtime.
            if let Err(e) = self.traces.shutdown() {
                eprintln!("tern: spans not flushed: {e}");
            }
            if let Err(e) = self.metrics.shutdown() {
                eprintln!("tern: counters not flushed: {e}");
            }
            if let Some(runtime) = self.runtime.take() {
                runtime.shutdown_background();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use tracing::Level;

    use super::log_filter_of;

    #[test]
    fn tern_log_reads_levels_and_targets_and_skips_empty_directives() {
        // Unset, empty, or only commas: the default, warnings.
        for given in [None, Some(""), Some(" , ,")] {
            let filter = log_filter_of(given);
            assert!(
                filter.would_enable("tern_server", &Level::WARN),
                "{given:?}"
            );
            assert!(
                !filter.would_enable("tern_server", &Level::INFO),
                "{given:?}"
            );
        }
        // A trailing comma does not turn on every target at TRACE.
        let filter = log_filter_of(Some("info,"));
        assert!(filter.would_enable("tern_server", &Level::INFO));
        assert!(!filter.would_enable("tern_server", &Level::DEBUG));
        // A level and a target: the target more verbose than the rest.
        let filter = log_filter_of(Some("warn,tern_client=debug"));
        assert!(filter.would_enable("tern_client::transport", &Level::DEBUG));
        assert!(!filter.would_enable("tern_server", &Level::INFO));
        // Unreadable: the default.
        let filter = log_filter_of(Some("tern_client=loud"));
        assert!(filter.would_enable("tern_server", &Level::WARN));
        assert!(!filter.would_enable("tern_client", &Level::INFO));
    }
}
