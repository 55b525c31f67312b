// The conformance cases the CUDA harness runs, as one `conformance_tests!` invocation,
// `include!`d by `../conformance.rs` after it defines that macro (how it runs one case) and the
// harness the cases call (`simple`, `check`, `Case`).
conformance_tests! {
    get_rows => get_rows_case();
    mul_mat => mul_mat_case();
    rms_norm => row_op_case("rms_norm", 1e-10, |b, a, _, _| Ok(b.rms_norm(a, 1e-6)));
    mul_weight => row_op_case("mul_weight", 1e-12, |b, a, _, n| b.mul_weight(a, n));
    add_weight => row_op_case("add_weight", 1e-12, |b, a, _, n| b.add_weight(a, n));
    add => row_op_case("add", 1e-12, |b, a, c, _| b.add(a, c));
    scale => row_op_case("scale", 1e-12, |b, a, _, _| Ok(b.scale(a, 0.37)));
    swiglu => row_op_case("swiglu", 1e-10, |b, a, c, _| b.swiglu(a, c));
    geglu => row_op_case("geglu", 1e-6, |b, a, c, _| b.geglu(a, c));
    softcap => row_op_case("softcap", 1e-10, |b, a, _, _| Ok(b.softcap(a, 2.5)));
    reglu => row_op_case("reglu", 1e-12, |b, a, c, _| b.reglu(a, c));
    swiglu_oai => row_op_case("swiglu_oai", 1e-10, |b, a, c, _| b.swiglu_oai(a, c, 1.702, 2.0));
    activation => activation_case();
    output_rows => row_op_case("output_rows", 0.0, |b, a, _, _| Ok(b.output_rows(a)));
    moe_route => moe::moe_route_case();
    mul_mat_id => moe::mul_mat_id_case();
    add_id => moe::add_id_case();
    moe_sum => moe::moe_sum_case();
    slice => row_op_case("slice", 0.0, |b, a, _, _| {
        let width = b.ne(a)[0];
        b.slice(a, width / 4, width / 2)
    });
    rope => rope_case();
    attention => attention::attention_case();
    attention_sliding_window_and_softcap => attention::attention_sliding_window_and_softcap_case();
    attention_sinks => attention::attention_sinks_case();
    attention_head_dim_256 => attention::attention_head_dim_256_case();
    attention_after_context_shift => attention::attention_after_context_shift_case();
    argmax_on_the_gpu_matches_the_logits => argmax_on_the_gpu_matches_the_logits_case();
}
