/** Database URLs in messages: the password never shows (no driver loaded here). */

/** `url` with the password (if any) replaced by `***`, for messages and reports. */
export function redactDatabaseUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    const pw = u.searchParams.get('password');
    if (pw !== null) u.searchParams.set('password', '***');
    return u.toString();
  } catch {
    return '(an unparsable database URL)';
  }
}
