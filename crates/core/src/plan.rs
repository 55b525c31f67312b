//! Buffer planning for a graph: each node's output gets a slot (a reusable f32 buffer) that is
//! free again after the node's last reader, so a forward pass needs a handful of buffers, not
//! one per node. Reshapes share their input's slot.

use crate::graph::{Graph, NodeId, Op};

pub struct Plan {
    /// Slot of each node's output (a reshape's is its input's).
    pub slot_of: Vec<usize>,
    /// Elements each slot must hold.
    pub slot_len: Vec<usize>,
}

impl Plan {
    pub fn new(graph: &Graph) -> Plan {
        let n = graph.nodes.len();
        // The node owning each node's storage (itself, or what it reshapes).
        let mut root: Vec<usize> = (0..n).collect();
        for (i, node) in graph.nodes.iter().enumerate() {
            if let Op::Reshape { x } = node.op {
                root[i] = root[x.0 as usize];
            }
        }
        // Last node reading each root's storage; the output lives to the end.
        let mut last_use: Vec<usize> = (0..n).collect();
        for (i, node) in graph.nodes.iter().enumerate() {
            for NodeId(src) in node.op.inputs() {
                let r = root[src as usize];
                last_use[r] = last_use[r].max(i);
            }
        }
        last_use[root[graph.output.0 as usize]] = usize::MAX;

        let mut slot_of = vec![usize::MAX; n];
        let mut slot_len: Vec<usize> = Vec::new();
        let mut free: Vec<usize> = Vec::new();
        // Roots whose storage dies after node i, per i.
        let mut dies_at: Vec<Vec<usize>> = vec![Vec::new(); n];
        for r in 0..n {
            if root[r] == r && last_use[r] != usize::MAX {
                dies_at[last_use[r]].push(r);
            }
        }
        for i in 0..n {
            if root[i] != i {
                slot_of[i] = slot_of[root[i]];
            } else {
                let len = graph.nodes[i].n_elements();
                // Best fit among free slots: the smallest that holds it, else the largest
                // (grown), else a new one.
                let pick = free
                    .iter()
                    .enumerate()
                    .filter(|(_, &s)| slot_len[s] >= len)
                    .min_by_key(|(_, &s)| slot_len[s])
                    .or_else(|| free.iter().enumerate().max_by_key(|(_, &s)| slot_len[s]))
                    .map(|(fi, _)| fi);
                let slot = match pick {
                    Some(fi) => free.swap_remove(fi),
                    None => {
                        slot_len.push(0);
                        slot_len.len() - 1
                    }
                };
                slot_len[slot] = slot_len[slot].max(len);
                slot_of[i] = slot;
            }
            // Freed after the node ran: an input's slot is never the node's own output slot.
            for &r in &dies_at[i] {
                free.push(slot_of[r]);
            }
        }
        Plan { slot_of, slot_len }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::Node;

    fn node(op: Op, len: usize) -> Node {
        Node {
            op,
            ne: [len, 1, 1, 1],
        }
    }

    #[test]
    fn live_values_never_share_a_slot_and_dead_ones_are_reused() {
        let id = |i| NodeId(i);
        let nodes = vec![
            node(Op::Scale { x: id(0), s: 1.0 }, 8), // 0 (input-like; reads itself, harmless)
            node(Op::Scale { x: id(0), s: 2.0 }, 8), // 1
            node(Op::Reshape { x: id(1) }, 8),       // 2 shares 1
            node(Op::Scale { x: id(2), s: 2.0 }, 16), // 3
            node(Op::Add { a: id(0), b: id(3) }, 8), // 4: 0 and 3 live here
            node(Op::Scale { x: id(4), s: 2.0 }, 4), // 5 output
        ];
        let g = Graph {
            nodes,
            output: id(5),
            n_tokens: 1,
            n_outputs: 1,
        };
        let p = Plan::new(&g);
        assert_eq!(p.slot_of[2], p.slot_of[1]);
        assert_ne!(p.slot_of[3], p.slot_of[0]);
        assert_ne!(p.slot_of[3], p.slot_of[2]);
        assert_ne!(p.slot_of[4], p.slot_of[0]);
        assert_ne!(p.slot_of[4], p.slot_of[3]);
        assert!(p.slot_len.len() <= 4);
        for (i, nd) in g.nodes.iter().enumerate() {
            assert!(p.slot_len[p.slot_of[i]] >= nd.n_elements());
        }
    }
}
