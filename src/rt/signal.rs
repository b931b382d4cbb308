//! Shutdown signals. In production: SIGINT (Ctrl-C). Under `sim`: the harness's
//! `Handle::send_ctrl_c(node)`, so graceful shutdown is exercised in simulation too.

/// Completes when the process is asked to shut down.
pub async fn ctrl_c() -> std::io::Result<()> {
    #[cfg(feature = "sim")]
    {
        madsim::signal::ctrl_c().await
    }
    #[cfg(not(feature = "sim"))]
    {
        tokio::signal::ctrl_c().await
    }
}
