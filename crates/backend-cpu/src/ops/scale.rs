//! `Op::Scale`: every element times a constant.

pub fn scale(x: &[f32], s: f32, out: &mut [f32]) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = v * s;
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn multiplies_every_element() {
        let mut o = [0.0f32; 4];
        super::scale(&[1.0, -2.0, 3.5, 0.25], 2.0, &mut o);
        assert_eq!(o, [2.0, -4.0, 7.0, 0.5]);
    }
}
