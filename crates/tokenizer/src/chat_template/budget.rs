//! The work budget of a render: fuel counts instructions, but one instruction can copy a huge
//! string (`ns.s = ns.s ~ ns.s` doubles it with a handful), and minijinja has no hook on its
//! operators. So the compiled template is instrumented before it runs: after each instruction
//! that loads or makes a value, and before each that writes or compares one, a call to a
//! hidden filter charges the value's size to the render's [`Budget`] and refuses a value over
//! the value cap. Every byte a template makes, reads or writes is then paid for, so a render
//! ends within a work budget proportional to its conversation, whatever the template does.
//!
//! This uses minijinja's `unstable_machinery` (the compiled instructions and the VM), pinned
//! by Cargo.lock: the instruction match below has no catch-all, so a minijinja that adds an
//! instruction fails to build here until someone decides what it costs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use minijinja::machinery::{Instruction, Instructions};
use minijinja::value::{Value, ValueKind};
use minijinja::Error;

use super::limits::limit_error;

/// Hidden filters the instrumented code calls (a template cannot define filters, so it cannot
/// replace them; a colon cannot be written in a template's filter name either).
pub(super) const LOADED: &str = "tessera:loaded";
pub(super) const MADE: &str = "tessera:made";
pub(super) const RAW: &str = "tessera:raw";
/// The checked slice ([`super::guards`]) that replaces minijinja's `Slice` instruction.
pub(super) const SLICE: &str = "tessera:slice";
/// The checks before a multiplication (`Mul`): the right operand, then the left one.
pub(super) const MUL_RIGHT: &str = "tessera:mul_right";
pub(super) const MUL_LEFT: &str = "tessera:mul_left";

/// Deepest nesting of containers (lists, maps, namespaces) a made value may have. Dropping or
/// formatting a value recurses once per level, so a namespace wrapped in itself a few tens of
/// thousands of times in a loop overflowed the stack; real templates nest a handful.
pub const MAX_NESTING: usize = 64;

/// A filter local id that minijinja never caches (its "no slot" value).
const NO_SLOT: u8 = !0;

/// What one render may still spend, in bytes (a container item counts one).
pub(super) struct Budget {
    remaining: AtomicU64,
    total: u64,
    value_cap: u64,
    /// The right operand of the multiplication being checked ([`Repeat`] as two words).
    mul_right: [AtomicU64; 2],
}

/// What a multiplication's operand means for a repetition (`s * n`, `list * n`, either way
/// round): its length when it is a string or a sequence, its value when it is a count; `NONE`
/// where it is neither.
#[derive(Clone, Copy)]
struct Repeat {
    len: u64,
    count: u64,
}

const NONE: u64 = u64::MAX;

impl Repeat {
    fn of(value: &Value) -> Repeat {
        let len = match value.kind() {
            ValueKind::String => value.as_str().map(|s| s.len()),
            ValueKind::Seq | ValueKind::Iterable => value.len(),
            _ => None,
        };
        let count = match value.kind() {
            ValueKind::Number => value.as_usize(),
            _ => None,
        };
        Repeat {
            len: len.map_or(NONE, |n| n as u64),
            count: count.map_or(NONE, |n| n as u64),
        }
    }
}

impl Budget {
    pub fn new(total: u64, value_cap: u64) -> Arc<Budget> {
        Arc::new(Budget {
            remaining: AtomicU64::new(total),
            total,
            value_cap,
            mul_right: [AtomicU64::new(NONE), AtomicU64::new(NONE)],
        })
    }

    /// Refuses a repetition whose result passes the value cap, or whose count alone does:
    /// minijinja repeats a sequence lazily, n times over even when it is empty, so `[] * n`
    /// costs n steps that make nothing and no budget would see them.
    fn check_repeat(&self, left: Repeat) -> Result<(), Error> {
        let right = Repeat {
            len: self.mul_right[0].load(Ordering::Relaxed),
            count: self.mul_right[1].load(Ordering::Relaxed),
        };
        for (len, count) in [(left.len, right.count), (right.len, left.count)] {
            if len != NONE && count != NONE && len.saturating_mul(count).max(count) > self.value_cap
            {
                return Err(limit_error(format!(
                    "the template repeated a value {count} times (at most {} items or bytes)",
                    self.value_cap
                )));
            }
        }
        Ok(())
    }

    pub fn value_cap(&self) -> u64 {
        self.value_cap
    }

    /// Charges `value`: a string its length, a container its item count (`deep`: the size of
    /// everything in it, which is what writing, joining or comparing it costs).
    pub fn charge(&self, value: &Value, deep: bool) -> Result<(), Error> {
        let Some(cost) = weight_at(value, deep, self.value_cap.saturating_add(1), 0) else {
            return Err(limit_error(format!(
                "the template nested values deeper than {MAX_NESTING}"
            )));
        };
        if cost > self.value_cap {
            return Err(limit_error(format!(
                "the template made a value of more than {} bytes",
                self.value_cap
            )));
        }
        self.spend(cost)
    }

    pub fn spend(&self, cost: u64) -> Result<(), Error> {
        // One render runs on one thread; the atomic only makes the filters `Sync`.
        let left = self.remaining.load(Ordering::Relaxed);
        if cost > left {
            return Err(limit_error(format!(
                "the template handled more than {} bytes",
                self.total
            )));
        }
        self.remaining.store(left - cost, Ordering::Relaxed);
        Ok(())
    }
}

/// The size of `value`: a string's bytes, a container's items (`deep`: and everything in them),
/// counted up to `limit` (the count stops there); `u64::MAX` when nested deeper than
/// [`MAX_NESTING`].
pub(super) fn weight(value: &Value, deep: bool, limit: u64) -> u64 {
    weight_at(value, deep, limit, 0).unwrap_or(u64::MAX)
}

/// [`weight`] at nesting `depth`; `None` past [`MAX_NESTING`].
fn weight_at(value: &Value, deep: bool, limit: u64, depth: usize) -> Option<u64> {
    let containers = [ValueKind::Seq, ValueKind::Map, ValueKind::Iterable];
    let kind = value.kind();
    Some(match kind {
        ValueKind::String => value.as_str().map_or(1, |s| s.len() as u64),
        ValueKind::Bytes => value.as_bytes().map_or(1, |b| b.len() as u64),
        _ if containers.contains(&kind) && deep => {
            if depth >= MAX_NESTING {
                return None;
            }
            let Ok(items) = value.try_iter() else {
                return Some(1);
            };
            let mut total = 1u64;
            for item in items {
                let left = limit - total.min(limit);
                total = total.saturating_add(weight_at(&item, true, left, depth + 1)?);
                if kind == ValueKind::Map {
                    if let Ok(v) = value.get_item(&item) {
                        let left = limit - total.min(limit);
                        total = total.saturating_add(weight_at(&v, true, left, depth + 1)?);
                    }
                }
                if total >= limit {
                    break;
                }
            }
            total
        }
        _ if containers.contains(&kind) => match value.len() {
            Some(n) => n as u64,
            // An iterable that does not know its length: count it, up to the limit.
            None => value
                .try_iter()
                .map_or(1, |items| items.take(limit as usize).count() as u64),
        },
        _ => 1,
    })
}

/// What the instrumented code does around one instruction.
#[derive(Clone, Copy, PartialEq)]
enum Charge {
    /// Nothing: control flow, numbers, booleans, constants of the source.
    None,
    /// After it: the value it loaded (a variable, an attribute, an item), shallow.
    Loaded,
    /// After it: the value it made, deep.
    Made,
    /// Before it: the value about to be written, deep.
    Written,
    /// Before it: both operands, deep (a comparison reads them whole and makes nothing).
    Compared,
    /// Before it: the raw text it writes.
    Raw,
    /// Before it: the repetition its operands make ([`Budget::check_repeat`]); after it: the
    /// value made.
    Multiplied,
    /// Refused: the template reaches for other templates (only this one exists, uninstrumented).
    Refused,
}

fn charge_of(instr: &Instruction) -> Charge {
    use Instruction as I;
    match instr {
        I::EmitRaw(_) => Charge::Raw,
        I::Emit => Charge::Written,
        // Constants too: folding can make them large (bounded by `source::check`).
        I::Lookup(_) | I::GetAttr(_) | I::GetItem | I::Iterate(_) | I::LoadConst(_) => {
            Charge::Loaded
        }
        I::Slice
        | I::BuildMap(_)
        | I::BuildKwargs(_)
        | I::MergeKwargs(_)
        | I::BuildList(_)
        | I::ApplyFilter(..)
        | I::CallFunction(..)
        | I::CallMethod(..)
        | I::CallObject(_)
        | I::EndCapture => Charge::Made,
        I::Mul => Charge::Multiplied,
        I::Add | I::StringConcat => Charge::Made,
        I::Eq
        | I::Ne
        | I::Gt
        | I::Gte
        | I::Lt
        | I::Lte
        | I::In
        | I::CompareAndPreserve(_) => Charge::Compared,
        I::StoreLocal(_)
        | I::SetAttr(_)
        | I::UnpackList(_)
        | I::UnpackLists(_)
        | I::Sub
        | I::Div
        | I::IntDiv
        | I::Rem
        | I::Pow
        | I::Neg
        | I::Not
        | I::PerformTest(..)
        | I::PushLoop(_)
        | I::PushWith
        | I::PushDidNotIterate
        | I::PopFrame
        | I::PopLoopFrame
        | I::Jump(_)
        | I::JumpIfFalse(_)
        | I::JumpIfFalseOrPop(_)
        | I::JumpIfTrueOrPop(_)
        | I::PushAutoEscape
        | I::PopAutoEscape
        | I::BeginCapture(_)
        | I::DupTop
        | I::DiscardTop
        | I::Swap
        // These write (their instructions are charged) or recurse into a loop, and must stay
        // right before the instruction they return to (minijinja returns to the next index).
        | I::FastSuper
        | I::FastRecurse
        | I::CallBlock(_)
        | I::BuildMacro(..)
        | I::Return
        | I::IsUndefined
        | I::Enclose(_)
        | I::GetClosure => Charge::None,
        I::LoadBlocks | I::Include(_) | I::ExportLocals => Charge::Refused,
    }
}

fn filter<'s>(name: &'static str) -> Instruction<'s> {
    Instruction::ApplyFilter(name, Some(1), NO_SLOT)
}

/// `instructions` with the budget's charges inserted and every jump moved to match; `None`
/// when the template includes, imports or extends a template.
pub(super) fn instrument<'s>(instructions: &Instructions<'s>) -> Option<Instructions<'s>> {
    let n = instructions.len();
    let get = |i: usize| instructions.get(i as u32).expect("index below len");
    // Where each old instruction's group (charges before it, it, charges after it) starts.
    let mut start = Vec::with_capacity(n + 1);
    let mut at = 0u32;
    for i in 0..n {
        start.push(at);
        at += match charge_of(get(i)) {
            Charge::Refused => return None,
            Charge::None => 1,
            Charge::Loaded | Charge::Made | Charge::Written => 2,
            Charge::Raw => 4,
            Charge::Compared => 5,
            Charge::Multiplied => 6,
        };
    }
    start.push(at);
    let to = |target: u32| start[target as usize];
    let mut out = Instructions::new(instructions.name(), instructions.source());
    for i in 0..n {
        let span = instructions.get_span(i as u32).unwrap_or_default();
        let mut push = |instr: Instruction<'s>| out.add_with_span(instr, span);
        let instr = get(i);
        let charge = charge_of(instr);
        match charge {
            Charge::Written => push(filter(MADE)),
            Charge::Raw => {
                let Instruction::EmitRaw(text) = instr else {
                    unreachable!("raw charges are EmitRaw's")
                };
                push(Instruction::LoadConst(Value::from(text.len())));
                push(filter(RAW));
                push(Instruction::DiscardTop)
            }
            Charge::Compared => {
                push(filter(MADE));
                push(Instruction::Swap);
                push(filter(MADE));
                push(Instruction::Swap)
            }
            Charge::Multiplied => {
                push(filter(MUL_RIGHT));
                push(Instruction::Swap);
                push(filter(MUL_LEFT));
                push(Instruction::Swap)
            }
            _ => 0,
        };
        use Instruction as I;
        push(match instr {
            I::Jump(t) => I::Jump(to(*t)),
            I::JumpIfFalse(t) => I::JumpIfFalse(to(*t)),
            I::JumpIfFalseOrPop(t) => I::JumpIfFalseOrPop(to(*t)),
            I::JumpIfTrueOrPop(t) => I::JumpIfTrueOrPop(to(*t)),
            I::Iterate(t) => I::Iterate(to(*t)),
            I::BuildMacro(name, offset, flags) => I::BuildMacro(name, to(*offset), *flags),
            // Same stack effect: four values in (value, start, stop, step), one out.
            I::Slice => I::CallFunction(SLICE, Some(4)),
            other => other.clone(),
        });
        match charge {
            Charge::Loaded => push(filter(LOADED)),
            Charge::Made | Charge::Multiplied => push(filter(MADE)),
            _ => 0,
        };
    }
    Some(out)
}

/// A lazily built sized sequence (minijinja's concatenation of lists, a slice of one) as a
/// plain list. Iterating a lazy value iterates the values it was built from, so a template
/// nesting them (a list sliced and concatenated with itself, level after level: found by
/// fuzzing) made one iteration cost 2^levels steps; plain lists keep every level's cost its
/// length. The charge has just walked the value, so the copy costs no more than that.
fn materialized(value: Value) -> Value {
    let lazy = matches!(value.kind(), ValueKind::Seq | ValueKind::Iterable)
        && value.len().is_some()
        && value.downcast_object_ref::<Vec<Value>>().is_none();
    match value.try_iter() {
        Ok(items) if lazy => Value::from(items.collect::<Vec<_>>()),
        _ => value,
    }
}

/// The filters the instrumented code calls, charging `budget`.
pub(super) fn add_filters(env: &mut minijinja::Environment<'static>, budget: &Arc<Budget>) {
    let b = budget.clone();
    env.add_filter(LOADED, move |v: Value| b.charge(&v, false).map(|_| v));
    let b = budget.clone();
    env.add_filter(MADE, move |v: Value| {
        b.charge(&v, true).map(|_| materialized(v))
    });
    let b = budget.clone();
    env.add_filter(RAW, move |len: u64| b.spend(len).map(|_| Value::UNDEFINED));
    let b = budget.clone();
    env.add_filter(MUL_RIGHT, move |v: Value| {
        let r = Repeat::of(&v);
        b.mul_right[0].store(r.len, Ordering::Relaxed);
        b.mul_right[1].store(r.count, Ordering::Relaxed);
        v
    });
    let b = budget.clone();
    env.add_filter(MUL_LEFT, move |v: Value| {
        b.check_repeat(Repeat::of(&v)).map(|_| v)
    });
}
