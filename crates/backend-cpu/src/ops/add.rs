//! `Op::Add`: element-wise sum.

pub fn add(a: &[f32], b: &[f32], out: &mut [f32]) {
    debug_assert!(a.len() == b.len() && a.len() == out.len());
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
        *o = x + y;
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn adds_element_by_element() {
        let mut o = [0.0f32; 4];
        super::add(&[1.0, -2.0, 3.5, 0.25], &[0.5, 2.0, -1.5, 4.0], &mut o);
        assert_eq!(o, [1.5, 0.0, 2.0, 4.25]);
    }
}
