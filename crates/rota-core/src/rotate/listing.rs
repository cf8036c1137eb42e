//! Lists of pods and nodes in the words rota writes: the first few named, the rest counted.
//!
//! A pool's message names what it waits for, and the message is stored three more times in
//! its status (the `Ready`, `Progressing` and `Paused` conditions), sent with every status
//! write and every watch event of the NodePoolRotation, and read back by each of the agent's
//! passes. A batch of 200 nodes drains about 6,000 pods: named in full, one pool's status was
//! about a megabyte, near etcd's limit on an object and 30 times the 32,768 characters
//! Kubernetes allows a condition's message; at 20,000 nodes the agent's lists of the ten
//! pools' NodePoolRotations were the largest transient of its heap. A person reads the first
//! few names and the count; `kubectl get pods` has the rest.

/// How many items a message names before it counts the rest.
pub const NAMED: usize = 10;

/// `items` joined by `sep`, at most [`NAMED`] of them, then `… and N more` for the rest.
pub fn listed<S: AsRef<str>>(items: &[S], sep: &str) -> String {
    capped(items).join(sep)
}

/// `items` cut to [`NAMED`], with one more entry counting the rest: a stop note's
/// `blockedBy`.
pub fn capped<S: AsRef<str>>(items: &[S]) -> Vec<String> {
    let mut out: Vec<String> = items
        .iter()
        .take(NAMED)
        .map(|i| i.as_ref().to_owned())
        .collect();
    if items.len() > NAMED {
        out.push(format!("… and {} more", items.len() - NAMED));
    }
    out
}

/// The longest message a status carries, in bytes: what the lists above leave is far
/// shorter; this holds for any message (an error text from a cloud, say) well within the
/// 32,768 characters of a condition's message.
pub const MESSAGE_BYTES: usize = 4096;

/// `message` cut to [`MESSAGE_BYTES`] (at a character boundary, ending in `…`).
pub fn bounded(message: &str) -> std::borrow::Cow<'_, str> {
    if message.len() <= MESSAGE_BYTES {
        return message.into();
    }
    let mut end = MESSAGE_BYTES - '…'.len_utf8();
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &message[..end]).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pods(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("shop/web-{i} (evicting)")).collect()
    }

    #[test]
    fn a_short_list_is_named_in_full() {
        assert_eq!(
            listed(&pods(2), ", "),
            "shop/web-0 (evicting), shop/web-1 (evicting)"
        );
        assert_eq!(
            listed(&pods(NAMED), ", ").matches("evicting").count(),
            NAMED
        );
        assert_eq!(listed::<String>(&[], ", "), "");
        assert_eq!(capped(&pods(3)), pods(3));
    }

    #[test]
    fn a_batchs_six_thousand_pods_are_ten_names_and_a_count() {
        let all = pods(6000);
        let line = listed(&all, ", ");
        assert!(line.starts_with("shop/web-0 (evicting), shop/web-1 (evicting)"));
        assert!(line.ends_with(", … and 5990 more"), "{line}");
        assert_eq!(line.matches("evicting").count(), NAMED);
        assert!(line.len() < 400, "{} characters", line.len());
        let note = capped(&all);
        assert_eq!(note.len(), NAMED + 1);
        assert_eq!(note[NAMED], "… and 5990 more");
    }

    #[test]
    fn any_message_is_cut_to_its_bound_at_a_character_boundary() {
        assert_eq!(bounded("short"), "short");
        let long = "é".repeat(MESSAGE_BYTES);
        let cut = bounded(&long);
        assert!(cut.len() <= MESSAGE_BYTES, "{}", cut.len());
        assert!(cut.ends_with('…'));
        assert!(cut.len() > MESSAGE_BYTES - 8);
    }
}
