//! One generation as the OpenAI API answers it: a whole JSON response, or (`stream: true`)
//! server-sent events — `data: {chunk}` per piece of text, a last chunk with the finish reason,
//! `usage` and llama.cpp-style `timings`, then `data: [DONE]`.

use std::convert::Infallible;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Map, Value};
use tessera_runtime::constraint;
use tessera_runtime::generate::GenerateStats;
use tessera_runtime::generation::SpecReport;
use tessera_runtime::request::Bounds;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use crate::answer::{self, ChatPlan, Reading};
use crate::error::ApiError;
use crate::models::Loaded;
use crate::request::Options;
use crate::routes::{cpu, next_number};
use crate::slots::{Event, Job, EVENT_BUFFER};
use crate::App;

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Chat,
    Completion,
}

/// Identity of one response.
struct Meta {
    id: String,
    created: u64,
    model: String,
    kind: Kind,
}

impl Meta {
    fn object(&self, chunk: bool) -> &'static str {
        match (self.kind, chunk) {
            (Kind::Chat, false) => "chat.completion",
            (Kind::Chat, true) => "chat.completion.chunk",
            (Kind::Completion, _) => "text_completion",
        }
    }

    /// A streamed chunk: `text` as the chat delta (or completion text), and the finish reason.
    fn chunk(&self, text: Option<&str>, first: bool, finish: Option<&str>) -> Value {
        match self.kind {
            Kind::Chat => {
                let mut delta = Map::new();
                if let Some(t) = text {
                    delta.insert("content".into(), json!(t));
                }
                self.delta_chunk(delta, first, finish)
            }
            Kind::Completion => self.with_choice(
                json!({"index": 0, "text": text.unwrap_or(""), "finish_reason": finish}),
            ),
        }
    }

    /// A streamed chat chunk with the delta's fields (the role in the first).
    fn delta_chunk(
        &self,
        mut delta: Map<String, Value>,
        first: bool,
        finish: Option<&str>,
    ) -> Value {
        if first {
            delta.insert("role".into(), json!("assistant"));
        }
        self.with_choice(json!({"index": 0, "delta": delta, "finish_reason": finish}))
    }

    fn with_choice(&self, choice: Value) -> Value {
        json!({
            "id": self.id,
            "object": self.object(true),
            "created": self.created,
            "model": self.model,
            "choices": [choice],
        })
    }
}

fn usage(s: &GenerateStats) -> Value {
    json!({
        "prompt_tokens": s.n_prompt,
        "completion_tokens": s.n_generated,
        "total_tokens": s.n_prompt + s.n_generated,
    })
}

/// llama-server's `timings` (milliseconds; `cache_n`: prompt tokens reused from the slot;
/// `draft_n` / `draft_n_accepted` for a speculative request).
fn timings(s: &GenerateStats, spec: Option<&SpecReport>) -> Value {
    let per_token = |ms: f64, n: usize| if n > 0 { ms / n as f64 } else { 0.0 };
    let (prompt_ms, predicted_ms) = (s.prompt_s * 1e3, s.generate_s * 1e3);
    let mut t = json!({
        "cache_n": s.n_prompt - s.n_prompt_eval,
        "prompt_n": s.n_prompt_eval,
        "prompt_ms": prompt_ms,
        "prompt_per_token_ms": per_token(prompt_ms, s.n_prompt_eval),
        "prompt_per_second": s.prompt_tokens_per_s(),
        "predicted_n": s.n_generated,
        "predicted_ms": predicted_ms,
        "predicted_per_token_ms": per_token(predicted_ms, s.n_generated),
        "predicted_per_second": s.generate_tokens_per_s(),
    });
    if let Some(r) = spec {
        t["draft_n"] = json!(r.n_drafted);
        t["draft_n_accepted"] = json!(r.n_accepted);
    }
    t
}

/// Runs `prompt` on `loaded`'s slots with the request's options, for `caller` (whose cache
/// only it may reuse).
pub async fn run(
    app: &App,
    loaded: &Loaded,
    prompt: Vec<u32>,
    options: &Options,
    kind: Kind,
    caller: String,
    plan: ChatPlan,
) -> Result<Response, ApiError> {
    let n = next_number(app);
    let clock_seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    // Every answer ends: the server's cap holds when the request asks for more, or for no
    // limit (-1), also where context shift would let it run forever.
    let cap = app.settings.max_generated.unwrap_or(loaded.n_ctx_slot);
    let mut params = options.generate_params(&Bounds {
        n_vocab: loaded.model.n_vocab(),
        n_ctx: loaded.n_ctx_slot,
        default_seed: clock_seed ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15),
        default_max_tokens: Some(cap),
    })?;
    params.max_tokens = Some(params.max_tokens.map_or(cap, |n| n.min(cap)));
    if plan.grammar.is_some() {
        // The request model refuses tools beside structured output: one grammar at most.
        params.grammar = plan.grammar;
    }
    let reading = plan.output.map(|(format, options)| Reading {
        format,
        options,
        number: n,
    });
    if prompt.is_empty() {
        return Err(ApiError::invalid("the prompt is empty"));
    }
    if prompt.len() >= loaded.n_ctx_slot {
        return Err(ApiError::exceeds_context(prompt.len(), loaded.n_ctx_slot));
    }
    let n_vocab = loaded.model.n_vocab();
    if let Some(&id) = prompt.iter().find(|&&id| id as usize >= n_vocab) {
        return Err(ApiError::invalid(format!(
            "prompt token {id} is not below the vocabulary size {n_vocab}"
        )));
    }
    if let Some(grammar) = params.grammar.clone() {
        let model = loaded.model.clone();
        cpu(app, move || constraint::check(&model, &grammar))
            .await?
            .map_err(|e| ApiError::invalid(format!("grammar: {e}")))?;
    }
    let spec = options.spec_params()?;
    let (events, mut rx) = mpsc::channel(EVENT_BUFFER);
    loaded.slots.submit(Job {
        prompt,
        params,
        spec,
        shift_keep: loaded.shift_keep,
        caller,
        events,
    })?;
    let meta = Meta {
        id: format!(
            "{}-{n}",
            if kind == Kind::Chat {
                "chatcmpl"
            } else {
                "cmpl"
            }
        ),
        created: clock_seed / 1_000_000_000,
        model: loaded.name.clone(),
        kind,
    };
    if options.stream {
        let include_usage = options
            .stream_options
            .as_ref()
            .is_some_and(|o| o.include_usage);
        return Ok(sse(
            meta,
            rx,
            reading,
            include_usage,
            app.settings.limits.write_timeout,
        ));
    }
    let mut text = String::new();
    let mut slot = None;
    loop {
        match rx.recv().await {
            Some(Event::Started { slot: s, .. }) => slot = Some(s),
            Some(Event::Text(t)) => text.push_str(&t),
            Some(Event::Done(stats, spec)) => {
                let (message, called) = match &reading {
                    Some(r) => {
                        let out = r.whole(&text);
                        (out.to_openai(), !out.tool_calls.is_empty())
                    }
                    None => (json!({"role": "assistant", "content": text}), false),
                };
                let reason = answer::finish_reason(stats.stop, called);
                let choice = match kind {
                    Kind::Chat => json!({"index": 0, "message": message, "finish_reason": reason}),
                    Kind::Completion => json!({"index": 0, "text": text, "finish_reason": reason}),
                };
                return Ok(Json(json!({
                    "id": meta.id,
                    "object": meta.object(false),
                    "created": meta.created,
                    "model": meta.model,
                    "choices": [choice],
                    "usage": usage(&stats),
                    "timings": timings(&stats, spec.as_ref()),
                    "id_slot": slot,
                }))
                .into_response());
            }
            Some(Event::Failed(e)) => return Err(e),
            None => {
                return Err(ApiError::internal(
                    "the generation stopped without an answer",
                ))
            }
        }
    }
}

/// The SSE answer. A task turns the slot's events into chunks. When the client goes away the
/// response stream drops and the task, waiting for the slot or for its next event, ends at once
/// (dropping the slot's receiver, which drops the request if it waits and cancels its
/// generation if it runs); a client that reads nothing for `write_timeout` is dropped alike.
fn sse(
    meta: Meta,
    mut rx: mpsc::Receiver<Event>,
    reading: Option<Reading>,
    include_usage: bool,
    write_timeout: Duration,
) -> Response {
    let (tx, out) = mpsc::channel::<Result<SseEvent, Infallible>>(EVENT_BUFFER);
    tokio::spawn(async move {
        let send = |v: Value| {
            let tx = tx.clone();
            async move {
                let chunk = Ok(SseEvent::default().data(v.to_string()));
                matches!(
                    tokio::time::timeout(write_timeout, tx.send(chunk)).await,
                    Ok(Ok(()))
                )
            }
        };
        let mut first = true;
        let mut parser = reading.as_ref().map(Reading::stream);
        loop {
            let event = tokio::select! {
                e = rx.recv() => e,
                () = tx.closed() => return,
            };
            let Some(event) = event else { return };
            let ok = match event {
                Event::Started { .. } => true,
                Event::Text(t) => match &mut parser {
                    None => {
                        let ok = send(meta.chunk(Some(&t), first, None)).await;
                        first = false;
                        ok
                    }
                    Some(p) => {
                        let d = p.push(&t);
                        let ok = d.is_empty()
                            || send(meta.delta_chunk(d.to_openai(), first, None)).await;
                        first &= d.is_empty();
                        ok
                    }
                },
                Event::Done(stats, spec) => {
                    let (tail, called) = match parser.take() {
                        Some(p) => {
                            let (out, d) = p.finish();
                            (Some(d), !out.tool_calls.is_empty())
                        }
                        None => (None, false),
                    };
                    let reason = answer::finish_reason(stats.stop, called);
                    if let Some(d) = tail.filter(|d| !d.is_empty()) {
                        send(meta.delta_chunk(d.to_openai(), first, None)).await;
                        first = false;
                    }
                    let mut last = meta.chunk(None, first, Some(reason));
                    last["timings"] = timings(&stats, spec.as_ref());
                    if include_usage {
                        send(last).await;
                        let mut u = meta.chunk(None, false, None);
                        u["choices"] = json!([]);
                        u["usage"] = usage(&stats);
                        send(u).await;
                    } else {
                        last["usage"] = usage(&stats);
                        send(last).await;
                    }
                    let done = tx.send(Ok(SseEvent::default().data("[DONE]")));
                    let _ = tokio::time::timeout(write_timeout, done).await;
                    return;
                }
                Event::Failed(e) => {
                    send(e.body()).await;
                    return;
                }
            };
            if !ok {
                return;
            }
        }
    });
    Sse::new(ReceiverStream::new(out))
        .keep_alive(KeepAlive::default())
        .into_response()
}
