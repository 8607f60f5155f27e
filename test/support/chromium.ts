/**
 * Debian's `chromium`, for the run viewer's browser test: where it is, or why that test is skipped (and, with
 * `VALET_REQUIRE_CHROMIUM=1` as in CI, fails instead).
 */
import { existsSync } from "node:fs"

/** Where Debian's `chromium` package puts the browser. */
export const chromiumPath = "/usr/bin/chromium"

/** Why there is no browser to test with, or undefined when there is one. */
export const chromiumUnavailable: string | undefined = existsSync(chromiumPath)
  ? undefined
  : `${chromiumPath} is missing (apt-get install chromium)`

/** CI sets `VALET_REQUIRE_CHROMIUM=1`: there a missing browser fails the browser test instead of skipping it. */
export const chromiumRequired: boolean = process.env.VALET_REQUIRE_CHROMIUM === "1"
