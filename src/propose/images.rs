//! The pass's first step: new images the clouds published, one proposal per channel with a
//! `source` (discovery's findings, as `rota images discover --open-pr` makes them).

use std::sync::Arc;

use rota_core::cloud::NodeGroups;

use super::{Pass, Say};
use crate::discovery;

impl Pass<'_> {
    /// Each channel's newest baked build, asked of `clouds` and proposed on
    /// `rota/images/<channel>`. `Err`: discovery could not run at all (the pass ends).
    pub(super) async fn images(
        &self,
        clouds: Arc<dyn NodeGroups>,
        say: Say<'_>,
        failures: &mut Vec<String>,
    ) -> Result<(), String> {
        let reports =
            discovery::discover(self.fleet, clouds.as_ref(), None, self.now, None).await?;
        for r in &reports {
            say(format!("images {}", discovery::describe(r, self.now)));
            if let Err(e) = &r.result {
                failures.push(format!("images {}: {}", r.channel, e.join("; ")));
            }
        }
        let open = discovery::OpenPr {
            parent: self.commit,
            subdir: self.opts.subdir.as_deref(),
            at: self.to,
        };
        match discovery::open_prs(self.files, self.fleet, &reports, &open).await {
            Ok(lines) => lines.into_iter().for_each(|l| say(format!("images {l}"))),
            Err(e) => failures.push(format!("images: {e}")),
        }
        Ok(())
    }
}
