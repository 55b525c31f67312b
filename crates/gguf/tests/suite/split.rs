//! A model written as 3 shards reads back exactly like the unsplit model.

use crate::common;

use common::synthetic_writer;
use tessera_gguf::split::shard_file_name;
use tessera_gguf::GgufFile;

#[test]
fn three_shards_read_as_the_unsplit_model() {
    let w = synthetic_writer();
    let whole = GgufFile::from_bytes(w.to_bytes()).unwrap();
    let shards = w.to_split(3).unwrap();
    assert_eq!(shards.len(), 3);

    let dir = std::env::temp_dir().join(format!("gguf-test-{}-split3", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (no, bytes) in shards.iter().enumerate() {
        std::fs::write(dir.join(shard_file_name("tiny", no, 3)), bytes).unwrap();
    }
    let from_disk = GgufFile::open(dir.join("tiny-00002-of-00003.gguf")).unwrap();
    let from_memory = GgufFile::from_shards(shards).unwrap();

    for split in [&from_disk, &from_memory] {
        assert_eq!(split.shard_count(), 3);
        let (hs, hw) = (split.header(), whole.header());
        // Same model metadata, plus the split keys.
        for (k, v) in &hw.metadata {
            assert_eq!(hs.get(k), Some(v), "{k}");
        }
        assert_eq!(hs.get_u64("split.count"), Some(3));
        assert_eq!(hs.get_u64("split.no"), Some(0));
        assert_eq!(
            hs.get_u64("split.tensors.count"),
            Some(hw.tensors.len() as u64)
        );
        assert_eq!(hs.tensors.len(), hw.tensors.len());
        let mut shards_used = std::collections::BTreeSet::new();
        for (i, (ts, tw)) in hs.tensors.iter().zip(&hw.tensors).enumerate() {
            assert_eq!(
                (&ts.name, &ts.dims, ts.ty, ts.size),
                (&tw.name, &tw.dims, tw.ty, tw.size)
            );
            assert_eq!(
                split.tensor_data(&ts.name),
                whole.tensor_data(&tw.name),
                "{}",
                ts.name
            );
            shards_used.insert(split.tensor_location(i).unwrap().shard);
        }
        assert_eq!(shards_used.len(), 3, "tensors spread over every shard");
    }
    std::fs::remove_dir_all(dir).unwrap();
}
