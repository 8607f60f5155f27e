/**
 * Whether a process is alive on this machine: what a lock or claim a process left (its pid, its host) is checked
 * with before another takes it over.
 */

/** Whether a process with this pid exists on this machine (EPERM: it exists, and is someone else's). */
export const processExists = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}
