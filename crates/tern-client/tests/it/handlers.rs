//! Input handlers the tests script: they record the questions they were
//! asked, and answer as each test needs.

use std::future::Future;
use std::sync::{Arc, Mutex};

use tern_client::transport::BoxFuture;
use tern_client::{Elicitation, HandlerError, Question, Sampling};
use tern_protocol::content::{Role, TextContent};
use tern_protocol::elicitation::{
    ElicitRequestFormParams, ElicitRequestUrlParams, ElicitResult, ElicitValue, PrimitiveSchema,
};
use tern_protocol::sampling::{
    CreateMessageRequestParams, CreateMessageResult, SamplingContent, SamplingContentBlock,
};

type Answer = BoxFuture<'static, Result<ElicitResult, HandlerError>>;
type FormFn = Arc<dyn Fn(Question, ElicitRequestFormParams) -> Answer + Send + Sync>;
type UrlFn = Arc<dyn Fn(Question, ElicitRequestUrlParams) -> Answer + Send + Sync>;

/// An elicitation handler made of closures, recording every question.
#[derive(Clone)]
pub struct Elicit {
    form: FormFn,
    url: Option<UrlFn>,
    asked: Arc<Mutex<Vec<Question>>>,
}

impl Elicit {
    /// Answers forms with `answer`; no URL mode.
    pub fn form<F, Fut>(answer: F) -> Self
    where
        F: Fn(Question, ElicitRequestFormParams) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ElicitResult, HandlerError>> + Send + 'static,
    {
        Self {
            form: Arc::new(move |q, p| Box::pin(answer(q, p))),
            url: None,
            asked: Arc::default(),
        }
    }

    /// Accepts every form: string fields from `values` by field name (else
    /// "x"), booleans true.
    pub fn fill(values: &[(&str, &str)]) -> Self {
        let values: Vec<(String, String)> = values
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Self::form(move |_q, params| {
            let result = fill(&params, &values);
            async move { Ok(result) }
        })
    }

    /// Also answers URL-mode questions, with `answer`.
    #[must_use]
    pub fn with_url<F, Fut>(mut self, answer: F) -> Self
    where
        F: Fn(Question, ElicitRequestUrlParams) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ElicitResult, HandlerError>> + Send + 'static,
    {
        self.url = Some(Arc::new(move |q, p| Box::pin(answer(q, p))));
        self
    }

    /// The questions asked so far.
    pub fn asked(&self) -> Vec<Question> {
        self.asked.lock().unwrap().clone()
    }
}

/// An accepted form: each field from `values`, or a plausible value.
pub fn fill(params: &ElicitRequestFormParams, values: &[(String, String)]) -> ElicitResult {
    let content = params
        .requested_schema
        .properties
        .iter()
        .map(|(field, schema)| {
            let value = match schema {
                PrimitiveSchema::Boolean(_) => ElicitValue::Bool(true),
                _ => values
                    .iter()
                    .find(|(k, _)| k == field)
                    .map_or_else(|| "x".into(), |(_, v)| ElicitValue::from(v.as_str())),
            };
            (field.clone(), value)
        })
        .collect();
    ElicitResult::accept(content)
}

impl Elicitation for Elicit {
    fn form(
        &self,
        question: Question,
        params: ElicitRequestFormParams,
    ) -> BoxFuture<'_, Result<ElicitResult, HandlerError>> {
        self.asked.lock().unwrap().push(question.clone());
        (self.form)(question, params)
    }

    fn url(
        &self,
        question: Question,
        params: ElicitRequestUrlParams,
    ) -> BoxFuture<'_, Result<ElicitResult, HandlerError>> {
        self.asked.lock().unwrap().push(question.clone());
        match &self.url {
            Some(url) => url(question, params),
            None => Box::pin(async { Err(HandlerError("no URL mode".into())) }),
        }
    }

    fn supports_url(&self) -> bool {
        self.url.is_some()
    }
}

/// A model that always says "Paris".
#[derive(Debug, Clone, Copy)]
pub struct Paris;

impl Sampling for Paris {
    fn create_message(
        &self,
        _question: Question,
        _params: CreateMessageRequestParams,
    ) -> BoxFuture<'_, Result<CreateMessageResult, HandlerError>> {
        Box::pin(async {
            Ok(CreateMessageResult {
                role: Role::Assistant,
                content: SamplingContent::One(SamplingContentBlock::Text(TextContent::new(
                    "Paris",
                ))),
                model: "test-model".into(),
                stop_reason: None,
                meta: None,
            })
        })
    }
}

/// Sends on `tx` when dropped: a future holding it was cancelled.
#[derive(Debug)]
pub struct DropSignal(pub Option<tokio::sync::oneshot::Sender<()>>);

impl Drop for DropSignal {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}
