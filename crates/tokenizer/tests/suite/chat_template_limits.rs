//! A GGUF's chat template is untrusted code: hostile templates (endless loops, deep recursion,
//! values and output that double, work that grows, huge widths, huge sources) fail fast with
//! `ChatTemplateError::Limit`, and llama.cpp's collection of real models' templates renders
//! exactly as without limits.

use std::time::{Duration, Instant};

use minijinja::{context, Environment, ErrorKind, Value};
use tessera_testkit::*;
use tessera_tokenizer::chat_template::limits::{self, MAX_NESTING, MAX_SOURCE_BYTES};
use tessera_tokenizer::chat_template::source::MAX_TAG_TOKENS;
use tessera_tokenizer::chat_template::{ChatMessage, ChatTemplate, ChatTemplateError};

fn conversation() -> Vec<ChatMessage> {
    vec![
        ChatMessage::new("system", "You are terse."),
        ChatMessage::new("user", "Hi!"),
        ChatMessage::new("assistant", "Hello."),
        ChatMessage::new("user", "  What is 2+2? "),
    ]
}

/// `source` rendered (no BOS or EOS text) after [`conversation`], without the generation prompt.
fn rendered(source: &str) -> String {
    let t = ChatTemplate::new(source, "", "").unwrap();
    t.render(&conversation(), false).unwrap()
}

/// Renders `source` and expects a limit error (saying `says`) within a few seconds (unbounded,
/// each of these runs for hours or until memory runs out).
fn assert_limited(source: &str, says: &str) {
    let start = Instant::now();
    let result =
        ChatTemplate::new(source, "<s>", "</s>").and_then(|t| t.render(&conversation(), true));
    let took = start.elapsed();
    match result {
        Err(ChatTemplateError::Limit(msg)) => {
            assert!(msg.contains(says), "{source}: {msg}");
            let shown = ChatTemplateError::Limit(msg).to_string();
            assert!(
                shown.starts_with("chat template exceeded a limit: "),
                "{shown}"
            );
        }
        other => panic!("{source}: expected a limit error, got {other:?}"),
    }
    assert!(took < Duration::from_secs(5), "{source}: took {took:?}");
}

#[test]
fn endless_loops_run_out_of_fuel() {
    assert_limited(
        "{% for i in range(10**9) %}x{% endfor %}",
        "range() of 1000000000 items",
    );
    assert_limited(
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
        "instructions (fuel)",
    );
    assert_limited(
        "{% set ns = namespace(n=0) %}{% for m in messages * 1000 %}{% for k in messages * 1000 %}\
         {% set ns.n = ns.n + 1 %}{% endfor %}{% endfor %}{{ ns.n }}",
        "instructions (fuel)",
    );
    // A list of the messages repeated too often to exist.
    assert_limited(
        "{% for m in messages * 100000 %}{% endfor %}",
        "made a value of more than",
    );
    // A list repeated 2.4e18 times makes nothing when it is empty, but minijinja steps through
    // every repetition (found by fuzzing: a hang without end). Computed while rendering:
    assert_limited(
        "{% for m in messages * 2426047410323587072e0 %}{% endfor %}",
        "repeated a value 2426047410323587072 times",
    );
    assert_limited(
        "{% set e = [] %}{% for m in e * 2426047410323587072 %}{% endfor %}",
        "repeated a value",
    );
    // Folded while compiling (constants), floats counted as their integers:
    assert_limited(
        "{% for m in [] * 2426047410323587072 %}{% endfor %}",
        "constant expressions could make",
    );
    assert_limited("{{ (10**15 * []) | length }}", "constant expressions");
    assert_limited("{{ 'x' * 1e8 }}", "constant expressions");
}

#[test]
fn lazily_nested_sequences_cost_their_length() {
    // Each level slices the list below and concatenates it with it: built lazily, iterating
    // level n walked level n - 1 twice (found by fuzzing: 2^50 steps).
    let start = Instant::now();
    assert_eq!(
        rendered(
            "{% macro r(n, s) %}{% if n < 30 %}{{ r(n + 1, s[::42] + s) }}{% else %}\
         {{ s | length }}{% endif %}{% endmacro %}{{ r(0, messages) }}"
        ),
        "34"
    );
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn multiplications_within_the_limits_render() {
    let t = ChatTemplate::new(
        "{{ 'ab' * 3 }} {{ 2 * 'c' }} {{ ([1, 2] * 2) | length }} {{ (2 * messages) | length }} \
         {{ 2 * 3 }} {{ 2.5 * 2 }} {{ '' * 1000 }}.",
        "<s>",
        "</s>",
    )
    .unwrap();
    assert_eq!(
        t.render(&conversation(), false).unwrap(),
        "ababab cc 4 8 6 5.0 ."
    );
}

#[test]
fn deep_recursion_is_cut() {
    assert_limited(
        "{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}",
        &format!("deeper than {}", limits::RECURSION_LIMIT),
    );
    // Mutual recursion through a caller block.
    assert_limited(
        "{% macro a(n) %}{% call b(n) %}{% endcall %}{% endmacro %}\
         {% macro b(n) %}{{ a(n + 1) }}{{ caller() }}{% endmacro %}{{ a(0) }}",
        "deeper than",
    );
}

#[test]
fn values_and_output_that_double_hit_the_caps() {
    let content_bytes = conversation().iter().map(|m| m.content.len()).sum();
    let cap = limits::value_cap(content_bytes);
    // Doubling a string without writing it: fuel alone would allow it, memory would not.
    for source in [
        "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
        "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
        "{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}",
        "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s * 2 %}{% endfor %}",
        "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = [ns.s, ns.s] | join %}{% endfor %}",
        "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = '{}{}'.format(ns.s, ns.s) %}{% endfor %}",
        "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s.replace('a', 'aa') %}{% endfor %}",
        // Through macro output, which minijinja captures into a string.
        "{% macro twice(s) %}{{ s }}{{ s }}{% endmacro %}{% set ns = namespace(s='x') %}\
         {% for i in range(64) %}{% set ns.s = twice(ns.s) %}{% endfor %}",
        "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set t %}{{ ns.s }}{{ ns.s }}{% endset %}\
         {% set ns.s = t %}{% endfor %}",
        // One step that multiplies at once.
        "{{ ('x' * 99999999) | length }}",
        "{{ ([messages] * 100000) | join }}",
        "{% set j = (messages | tojson) * 100 %}{{ j | replace('', j) | length }}",
        "{% set j = (messages | tojson) * 100 %}{{ j.replace('', j) | length }}",
        "{% set j = (messages | tojson) * 100 %}{{ j.join([j] * 100) | length }}",
        "{{ ('\\n' * 100000) | indent(200, true, true) | length }}",
    ] {
        assert_limited(source, "");
    }
    assert_limited(
        "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
        &format!("made a value of more than {cap} bytes"),
    );
    // Work that grows with each pass: every byte made, read and compared is counted.
    assert_limited(
        "{% set ns = namespace(s='') %}{% for i in range(100000) %}{% set ns.s = ns.s ~ messages[0].content %}{% endfor %}",
        "",
    );
    assert_limited(
        "{% set big = messages[0].content * 50000 %}{% for i in range(100000) %}{{ big | length > 0 }}{% endfor %}",
        "handled more than",
    );
    assert_limited(
        "{% set big = messages[0].content * 50000 %}{% for i in range(100000) %}{% if 'zz' in big %}!{% endif %}{% endfor %}",
        "handled more than",
    );
    assert_limited(
        "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}\
         {{ ns.s }}{% endfor %}",
        "",
    );
    // Doubling through macro calls, each writing the one below twice: 2^25 calls.
    assert_limited(
        "{% macro d(n) %}{% if n > 0 %}{{ d(n - 1) }}{{ d(n - 1) }}{% else %}0123456789abcdef\
         {% endif %}{% endmacro %}{{ d(25) }}",
        "instructions (fuel)",
    );
    // Writing a message's content over and over.
    assert_limited(
        "{% for i in range(100000) %}{% for m in messages %}{{ m.content * 1000 }}{% endfor %}{% endfor %}",
        "bytes",
    );
}

#[test]
fn widths_that_allocate_at_once_are_refused() {
    for (source, says) in [
        ("{{ 'x' | indent(1000000000) }}", "indent width 1000000000"),
        ("{{ 'x' | indent(width=1000000000) }}", "indent width"),
        ("{{ messages | tojson(indent=1000000000) }}", "tojson width"),
        (
            "{{ '%1000000000s' | format('x') }}",
            "format width 1000000000",
        ),
        ("{{ '%.999999999f' | format(1.5) }}", "format width"),
        ("{{ '{:>1000000000}'.format('x') }}", "format width"),
        ("{{ '{:*^99999999999}'.format('x') }}", "format width"),
    ] {
        assert_limited(source, says);
    }
    // Ordinary widths still work.
    let t = ChatTemplate::new(
        "{{ 'a\nb' | indent(2) }}|{{ {'k': 1} | tojson(indent=2) }}|{{ '%5s' | format('x') }}|{{ '{:>4}'.format('y') }}",
        "",
        "",
    )
    .unwrap();
    assert_eq!(
        t.render(&conversation(), false).unwrap(),
        "a\n  b|{\n  \"k\": 1\n}|    x|   y"
    );
}

#[test]
fn huge_and_garbage_sources_are_refused() {
    let huge = "{{ x }}".repeat(MAX_SOURCE_BYTES / 7 + 1);
    let start = Instant::now();
    match ChatTemplate::new(&huge, "", "") {
        Err(ChatTemplateError::Limit(msg)) => assert!(msg.contains("bytes"), "{msg}"),
        other => panic!("expected a limit error, got {:?}", other.map(|_| ())),
    }
    assert!(start.elapsed() < Duration::from_secs(1));
    // Just under the cap compiles (and renders quickly).
    let big = "{{ bos_token }}".repeat(MAX_SOURCE_BYTES / 15);
    let t = ChatTemplate::new(&big, "<s>", "").unwrap();
    assert_eq!(
        t.render(&conversation(), false).unwrap().len(),
        3 * (MAX_SOURCE_BYTES / 15)
    );
    // Deeply nested garbage is a syntax or limit error, not a stack overflow.
    for garbage in [
        "{{ ".to_string() + &"(".repeat(100_000),
        "{% if x %}".repeat(50_000),
        "[".repeat(200_000),
    ] {
        let r = ChatTemplate::new(&garbage, "", "").and_then(|t| t.render(&conversation(), false));
        assert!(
            matches!(
                r,
                Ok(_)
                    | Err(ChatTemplateError::Syntax(_))
                    | Err(ChatTemplateError::Render(_))
                    | Err(ChatTemplateError::Limit(_))
            ),
            "{:?}",
            r.map(|s| s.len())
        );
    }
}

#[test]
fn compiling_is_bounded_too() {
    // minijinja builds an operator chain as a tree as deep as the chain and walks it
    // recursively: 100,000 links would overflow the stack.
    for link in [" ~ 'a'", " | trim", ".a", " + 1", "[0]"] {
        let chain = format!("{{{{ x{} }}}}", link.repeat(100_000));
        assert_limited(&chain, &format!("more than {MAX_TAG_TOKENS} tokens"));
    }
    // minijinja folds constant expressions while compiling: 3 GB before anything runs.
    let folded = format!("{{{{ x{} }}}}", " ~ ('y' * 99999999)".repeat(30));
    assert_limited(&folded, "constant expressions");
    assert_limited("{{ 'x' * 99999999 }}", "constant expressions");
    assert_limited("{{ 'x' * 2 ** 40 }}", "constant expressions");
    // What real templates write still compiles.
    let t = ChatTemplate::new(
        "{{ '  ' * 4 }}{{ [1, 2] * 3 }}{{ 2 ** 10 }}{{ ('ab' * 1000) | length }}",
        "",
        "",
    )
    .unwrap();
    assert_eq!(
        t.render(&conversation(), false).unwrap(),
        "        [1, 2, 1, 2, 1, 2]10242000"
    );
}

#[test]
fn range_still_counts() {
    let t = ChatTemplate::new(
        "{% for i in range(3) %}{{ i }}{% endfor %}|{{ range(1, 10, 3) | list }}|{{ range(5, 0, -2) | list }}|{{ range(100000) | length }}",
        "",
        "",
    )
    .unwrap();
    assert_eq!(
        t.render(&conversation(), false).unwrap(),
        "012|[1, 4, 7]|[5, 3, 1]|100000"
    );
}

/// The environment `ChatTemplate` configures, without its limits: what the templates rendered
/// before the limits existed.
fn unlimited(source: &str) -> Result<String, String> {
    let mut env = Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    minijinja_contrib::add_to_environment(&mut env);
    env.add_function(
        "raise_exception",
        |msg: String| -> Result<Value, minijinja::Error> {
            Err(minijinja::Error::new(ErrorKind::InvalidOperation, msg))
        },
    );
    env.add_function("strftime_now", |format: String| {
        tessera_tokenizer::chat_template::strftime_now(&format)
    });
    env.add_template_owned("chat", source.to_owned())
        .map_err(|e| e.to_string())?;
    let t = env.get_template("chat").map_err(|e| e.to_string())?;
    t.render(context! {
        messages => conversation(),
        add_generation_prompt => true,
        bos_token => "<s>",
        eos_token => "</s>",
    })
    .map_err(|e| e.to_string())
}

#[test]
fn real_templates_render_as_without_limits() {
    let dir = models_dir().join("templates");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e} (run scripts/fetch-models.sh templates)",
                dir.display()
            )
        })
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jinja"))
        .collect();
    paths.sort();
    assert!(
        paths.len() >= 60,
        "{} templates in {}",
        paths.len(),
        dir.display()
    );
    let mut rendered = 0;
    for path in &paths {
        let source = std::fs::read_to_string(path).unwrap();
        let before = unlimited(&source);
        let now =
            ChatTemplate::new(&source, "<s>", "</s>").and_then(|t| t.render(&conversation(), true));
        match (&before, &now) {
            (Ok(a), Ok(b)) => {
                assert_eq!(a, b, "{}", path.display());
                rendered += 1;
            }
            // Templates minijinja cannot run (unknown tags or functions) or that reject this
            // conversation fail either way, never on a limit.
            (Err(_), Err(e)) => assert!(
                !matches!(e, ChatTemplateError::Limit(_)),
                "{}: {e}",
                path.display()
            ),
            _ => panic!("{}: before {before:?}, now {now:?}", path.display()),
        }
    }
    assert!(
        rendered >= 55,
        "only {rendered} of {} templates rendered",
        paths.len()
    );
}

/// The work budget runs the template's instructions with charges inserted and every jump
/// moved: the constructs with jumps and returns (loops with `else`, `break` and `continue`,
/// recursive loops, macros with `caller`, blocks, filter and set blocks, short-circuits,
/// chained comparisons) render exactly as minijinja renders them.
#[test]
fn instrumented_templates_render_as_minijinja_does() {
    let sources = [
        "{% for m in messages %}{% if loop.first %}[{% endif %}{{ loop.index }}:{{ m.role }}\
         {% if m.role == 'assistant' %}{% continue %}{% endif %}={{ m.content | trim }}\
         {% if loop.index > 3 %}{% break %}{% endif %}{% else %}none{% endfor %}",
        "{% for x in [] %}{{ x }}{% else %}empty{% endfor %}",
        "{% set tree = [{'n': 'a', 'c': [{'n': 'b', 'c': [{'n': 'c', 'c': []}]}]}, {'n': 'd', 'c': []}] %}\
         {% for item in tree recursive %}<{{ item.n }}{{ loop.depth }}{{ loop(item.c) }}>{% endfor %}",
        "{% macro box(title, width=3) %}[{{ title }}|{{ caller(width) if caller else '' }}]{% endmacro %}\
         {% call(w) box('t') %}{{ '*' * w }}{% endcall %}{{ box('plain', 5) }}",
        "{% block head %}H{{ messages | length }}{% endblock %}|{% block body %}{% for m in messages %}{{ m.role[0] }}{% endfor %}{% endblock %}",
        "{% filter upper %}{% for m in messages %}{{ m.content }};{% endfor %}{% endfilter %}\
         {% set sys %}{{ messages[0].content }}!{% endset %}{{ sys ~ sys }}",
        "{{ messages[0].content if messages and messages[0].role == 'system' else 'no' }}\
         {{ 1 < 2 < 3 }}{{ 3 > 2 > 5 }}{{ not messages or messages | length > 2 }}\
         {{ (messages | map(attribute='role') | unique | list) }}{{ messages | selectattr('role', 'eq', 'user') | list | length }}",
        "{% set ns = namespace(out='', n=0) %}{% for m in messages[::-1] %}{% set ns.out = ns.out ~ m.role ~ ',' %}\
         {% set ns.n = ns.n + m.content | length %}{% endfor %}{{ ns.out }}{{ ns.n }}{{ messages | tojson }}",
        "{% with a = 1, b = 'x' %}{{ a ~ b }}{% endwith %}{{ {'k': [1, 2]}.items() | list }}{{ 'a,b'.split(',') }}\
         {{ messages[-1].content.strip().startswith('What') }}{% raw %}{{ raw }}{% endraw %}",
    ];
    for source in sources {
        let now =
            ChatTemplate::new(source, "<s>", "</s>").and_then(|t| t.render(&conversation(), true));
        assert_eq!(
            now.map_err(|e| e.to_string()),
            unlimited(source),
            "{source}"
        );
    }
}

/// minijinja 2.24 panics slicing an empty value backwards, or backwards from before the stop
/// (found by fuzzing the chat templates): such slices render empty, as in Python, and every
/// other slice renders as minijinja renders it.
#[test]
fn backward_slices_that_panic_in_minijinja_are_empty() {
    let empty = [
        "{{ ''[::-1] }}",
        "{{ [][::-1] | list }}",
        "{{ (messages[0].content[0:0])[::-2] }}",
        "{{ 'abc'[1:5:-1] }}",
        "{{ 'abc'[10:5:-1] }}",
        "{{ [1, 2, 3][0:2:-1] | list }}",
        "{% for m in messages[1:3:-1] %}{{ m }}{% endfor %}",
    ];
    for source in empty {
        let t = ChatTemplate::new(source, "", "").unwrap();
        let out = t.render(&conversation(), false).unwrap();
        assert!(out.is_empty() || out == "[]", "{source}: {out:?}");
    }
    let same = [
        "{{ 'abcdef'[::-1] }}{{ 'abcdef'[4:1:-2] }}{{ 'abcdef'[-1:-4:-1] }}{{ 'abcdef'[:2:-1] }}",
        "{{ messages[::-1] | map(attribute='role') | list }}{{ messages[1:] | length }}",
        "{% for m in messages[::-1] %}{{ loop.index }}{{ m.role }}{% endfor %}{{ [1, 2, 3][::2] | list }}",
        "{{ 'abc'[5:0:-1] }}{{ 'abc'[2:0:-1] }}{{ 'abc'[-10::-1] }}{{ 'abc'[1:1:-1] }}",
    ];
    for source in same {
        let now = ChatTemplate::new(source, "", "").and_then(|t| t.render(&conversation(), true));
        assert_eq!(
            now.map_err(|e| e.to_string()),
            unlimited(source),
            "{source}"
        );
    }
}

/// minijinja 2.24 panics on a format key holding a character outside ASCII (it walks keys byte
/// by byte; found by fuzzing): refused with an error instead. ASCII keys still format.
#[test]
fn format_keys_outside_ascii_are_refused() {
    for source in [
        "{{ '{0[é]}'.format({'é': 1}) }}",
        "{{ '{x[\u{FFFD}]:^0}'.format(messages | length) }}",
        "{{ '%(é)s' | format({'é': 1}) }}",
    ] {
        let r = ChatTemplate::new(source, "", "").and_then(|t| t.render(&conversation(), false));
        assert!(
            matches!(r, Err(ChatTemplateError::Render(_))),
            "{source}: {r:?}"
        );
    }
    assert_eq!(
        rendered("{{ '{0[k]}|é|{{é}}'.format({'k': 1}) }}{{ '%(k)s é' | format({'k': 2}) }}"),
        "1|é|{é}2 é"
    );
}

/// Builtins that hang or allocate without bound in minijinja(-contrib) 2.24: counting an empty
/// string (an endless loop), `batch`/`slice` with a huge count (allocated at once).
#[test]
fn builtins_that_hang_or_allocate_at_once_are_bounded() {
    assert_eq!(
        rendered("{{ 'abc'.count('') }}{{ 'abcb'.count('b') }}"),
        "42"
    );
    for source in [
        "{{ messages | batch(1000000000000) | list }}",
        "{{ messages | slice(1000000000000) | list }}",
        "{{ messages | batch(count=1000000000000) | list }}",
    ] {
        assert_limited(source, "count");
    }
    assert_eq!(
        rendered(
            "{{ messages | batch(3) | list | length }}{{ messages | slice(2) | list | length }}"
        ),
        "22"
    );
}

/// Values nested in themselves in a loop: dropping or writing one recurses once per level, and
/// a namespace wrapped 30,000 times overflowed the stack. Nesting stops at `MAX_NESTING`.
#[test]
fn values_cannot_nest_without_bound() {
    for source in [
        "{% set h = namespace(x=none) %}{% for i in range(100000) %}{% set h.x = namespace(p=h.x) %}{% endfor %}",
        "{% set h = namespace(x=[]) %}{% for i in range(100000) %}{% set h.x = [h.x] %}{% endfor %}",
        "{% set h = namespace(x=none) %}{% for i in range(100000) %}{% set h.x = {'p': h.x} %}{% endfor %}",
        "{% set h = namespace(x=none) %}{% for i in range(100000) %}{% set h.x = dict(p=h.x) %}{% endfor %}",
    ] {
        // On a small stack, as in a browser's worker.
        let run = std::thread::Builder::new()
            .stack_size(1 << 20)
            .spawn(move || assert_limited(source, &format!("deeper than {MAX_NESTING}")))
            .unwrap();
        run.join().unwrap();
    }
    let t = ChatTemplate::new("{{ [[[[messages[0].role]]]] }}", "", "").unwrap();
    assert_eq!(
        t.render(&conversation(), false).unwrap(),
        "[[[[\"system\"]]]]"
    );
}
