//! Sets of Unicode scalar values as sorted, disjoint, non-adjacent inclusive ranges: a GBNF
//! character class, and the characters that may start or follow a part of a grammar.

/// The largest Unicode scalar value.
pub const MAX_CHAR: u32 = 0x10_FFFF;
const SURROGATES: (u32, u32) = (0xD800, 0xDFFF);

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CharSet {
    ranges: Vec<(u32, u32)>,
}

impl CharSet {
    pub fn empty() -> CharSet {
        CharSet::default()
    }

    /// Every scalar value (what `.` matches).
    pub fn any() -> CharSet {
        CharSet::from_ranges(&[(0, MAX_CHAR)])
    }

    pub fn single(c: u32) -> CharSet {
        CharSet::from_ranges(&[(c, c)])
    }

    /// The scalar values in `ranges` (reversed ranges are empty, as llama.cpp reads them;
    /// surrogates and values past U+10FFFF are left out: no text contains them).
    pub fn from_ranges(ranges: &[(u32, u32)]) -> CharSet {
        let mut set = CharSet::empty();
        for &(lo, hi) in ranges {
            let hi = hi.min(MAX_CHAR);
            if lo > hi {
                continue;
            }
            set.ranges.push((lo, hi));
        }
        set.normalize();
        set.remove(SURROGATES);
        set
    }

    pub fn ranges(&self) -> &[(u32, u32)] {
        &self.ranges
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The one value in the set, if it has exactly one.
    pub fn as_single(&self) -> Option<u32> {
        match self.ranges[..] {
            [(lo, hi)] if lo == hi => Some(lo),
            _ => None,
        }
    }

    /// Whether this is every scalar value.
    pub fn is_any(&self) -> bool {
        *self == CharSet::any()
    }

    /// The scalar values not in the set.
    pub fn complement(&self) -> CharSet {
        let mut out = Vec::with_capacity(self.ranges.len() + 1);
        let mut next = 0u32;
        for &(lo, hi) in &self.ranges {
            if lo > next {
                out.push((next, lo - 1));
            }
            next = hi + 1;
        }
        if next <= MAX_CHAR {
            out.push((next, MAX_CHAR));
        }
        CharSet::from_ranges(&out)
    }

    /// Adds `other`'s values (a merge of the two sorted lists); whether the set grew.
    pub fn add(&mut self, other: &CharSet) -> bool {
        if other.ranges.is_empty() {
            return false;
        }
        let (a, b) = (&self.ranges, &other.ranges);
        let mut out: Vec<(u32, u32)> = Vec::with_capacity(a.len() + b.len());
        let (mut i, mut j) = (0, 0);
        while i < a.len() || j < b.len() {
            let next = if j == b.len() || (i < a.len() && a[i].0 <= b[j].0) {
                i += 1;
                a[i - 1]
            } else {
                j += 1;
                b[j - 1]
            };
            match out.last_mut() {
                Some(last) if next.0 <= last.1.saturating_add(1) => last.1 = last.1.max(next.1),
                _ => out.push(next),
            }
        }
        let grew = out != self.ranges;
        self.ranges = out;
        grew
    }

    pub fn intersects(&self, other: &CharSet) -> bool {
        let (mut i, mut j) = (0, 0);
        while i < self.ranges.len() && j < other.ranges.len() {
            let (a, b) = (self.ranges[i], other.ranges[j]);
            if a.1 < b.0 {
                i += 1;
            } else if b.1 < a.0 {
                j += 1;
            } else {
                return true;
            }
        }
        false
    }

    fn normalize(&mut self) {
        self.ranges.sort_unstable();
        let mut out: Vec<(u32, u32)> = Vec::with_capacity(self.ranges.len());
        for &(lo, hi) in &self.ranges {
            match out.last_mut() {
                Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
                _ => out.push((lo, hi)),
            }
        }
        self.ranges = out;
    }

    fn remove(&mut self, (rlo, rhi): (u32, u32)) {
        let mut out = Vec::with_capacity(self.ranges.len() + 1);
        for &(lo, hi) in &self.ranges {
            if hi < rlo || lo > rhi {
                out.push((lo, hi));
                continue;
            }
            if lo < rlo {
                out.push((lo, rlo - 1));
            }
            if hi > rhi {
                out.push((rhi + 1, hi));
            }
        }
        self.ranges = out;
    }
}
