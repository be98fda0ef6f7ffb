@echo off
rem Shell completion for `kubectl meta ...` through kubectl's own completion (kubectl 1.26+) on
rem Windows: kubectl runs kubectl_complete-meta from PATH with the words after `kubectl meta`.
rem See completion/kubectl_complete-meta for the protocol.
if exist "%~dp0kubectl-meta.exe" (
    "%~dp0kubectl-meta.exe" __complete -- %*
) else (
    kubectl-meta.exe __complete -- %*
)
