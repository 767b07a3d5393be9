/**
 * Outgoing e-mail for login codes and organisation invitations: real SMTP through nodemailer, or — when
 * `SIDECAR_SMTP_URL` is unset — a development mailer that writes each code
 * to the log (with a loud warning at startup).
 */
import nodemailer from 'nodemailer';
import type { FastifyBaseLogger } from 'fastify';

/** Sends login-code messages. */
export interface Mailer {
  /** Sends the 6-digit code to `to`. Rejects when the message could not be handed over. */
  sendLoginCode(to: string, code: string, ttlMinutes: number): Promise<void>;
  /** Tells `to` they were invited to an organisation. Rejects when the message could not be handed over. */
  sendInvitation(to: string, invitation: InvitationMail): Promise<void>;
  /** Releases connections. */
  close(): void;
}

/** What an invitation message says. */
export interface InvitationMail {
  orgName: string;
  role: string;
  invitedBy: string;
  /** ISO time the invitation expires. */
  expiresAt: string;
  /** The invitation's id (the console accepts it after sign-in). */
  invitationId: string;
}

/** Builds an invitation's text (shared by both mailers and the tests). */
export function invitationText(i: InvitationMail): string {
  return `${i.invitedBy} invited you to join the organisation "${i.orgName}" on agent-authz as ${i.role}.\n\n`
    + 'Sign in to the console with this e-mail address to accept it under Invitations '
    + `(invitation ${i.invitationId}). It expires at ${i.expiresAt}.\n`
    + 'If you do not know this organisation, ignore this message.\n';
}

/** Builds the message text (shared by both mailers and the tests). */
export function loginCodeText(code: string, ttlMinutes: number): string {
  return `Your agent-authz sign-in code is ${code}\n\nIt expires in ${ttlMinutes} minutes and can be used once.\n`
    + 'If you did not ask for it, ignore this message.\n';
}

/** A nodemailer SMTP mailer (`smtp://user:pass@host:port`, or `smtps://`). */
export function createSmtpMailer(url: string, from: string): Mailer {
  const transport = nodemailer.createTransport(url);
  return {
    async sendLoginCode(to, code, ttlMinutes) {
      await transport.sendMail({ from, to, subject: `Your sign-in code: ${code}`, text: loginCodeText(code, ttlMinutes) });
    },
    async sendInvitation(to, i) {
      const subject = `Invitation to ${i.orgName} on agent-authz`;
      await transport.sendMail({ from, to, subject, text: invitationText(i) });
    },
    close: () => transport.close(),
  };
}

/** The development mailer: logs the code. Never use it in production. */
export function createLogMailer(log: FastifyBaseLogger): Mailer {
  log.warn('SIDECAR_SMTP_URL is not set: login codes are written to this log. FOR DEVELOPMENT ONLY.');
  return {
    async sendLoginCode(to, code) {
      log.warn({ devMailer: true, to, devLoginCode: code }, 'DEVELOPMENT MAILER: login code (set SIDECAR_SMTP_URL to send real e-mail)');
    },
    async sendInvitation(to, i) {
      log.warn({ devMailer: true, to, invitationId: i.invitationId, orgName: i.orgName },
        'DEVELOPMENT MAILER: invitation');
    },
    close() {},
  };
}
