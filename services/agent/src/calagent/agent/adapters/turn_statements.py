"""The statements of a turn's lease, claim and archive (`store.AgentStore` runs them): each one
statement, so one round trip and its own transaction."""

from __future__ import annotations

from sqlalchemy import Boolean, DateTime, String, bindparam, column, select, text
from sqlalchemy.dialects.postgresql import JSONB

from calagent.agent.adapters.tables import turns

HISTORY_LIMIT = 200
# A turn's start, one statement (one round trip, its own transaction: all of it or none commits).
# The user's lease is taken only when the statement's snapshot shows no live lease: the previous
# turn's reply, committed with its release, is then in that snapshot, so the history read here is
# the conversation up to this turn. Taken, it claims the turn (first delivery wins) and archives
# the user's message once per turn and role (a redelivered turn writes it again); a turn answered
# already reads no history. The history leaves out the turn's own messages, even those archived
# by an earlier delivery of it.
START = (
    text(
        """
    WITH held AS (
        SELECT 1 FROM agent.user_leases
        WHERE user_id = :user_id AND expires_at >= clock_timestamp()
    ), lease AS (
        INSERT INTO agent.user_leases (user_id, holder, expires_at)
        SELECT :user_id, :holder, clock_timestamp() + make_interval(secs => :ttl)
        WHERE NOT EXISTS (SELECT 1 FROM held)
        ON CONFLICT (user_id) DO UPDATE
            SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
            WHERE agent.user_leases.expires_at < clock_timestamp()
        RETURNING holder
    ), prior AS (
        SELECT status, answer FROM agent.turns WHERE user_id = :user_id AND turn_key = :turn_key
    ), replay AS (
        SELECT 1 FROM prior WHERE status = 'done' AND answer IS NOT NULL
    ), claim AS (
        INSERT INTO agent.turns (user_id, turn_key, turn_id, status, created_at, updated_at)
        SELECT :user_id, :turn_key, :turn_id, 'running', CAST(:at AS timestamptz), CAST(:at AS timestamptz)
        FROM lease
        ON CONFLICT ON CONSTRAINT pk_turns DO NOTHING
        RETURNING turn_key
    ), archive AS (
        INSERT INTO agent.messages (user_id, conversation_id, role, content, turn_id, created_at)
        SELECT :user_id, :conversation_id, 'user', :text, :turn_id, CAST(:at AS timestamptz)
        FROM lease WHERE NOT EXISTS (SELECT 1 FROM replay)
        ON CONFLICT ON CONSTRAINT uq_messages_turn_role DO NOTHING
    ), history AS (
        SELECT id, role, content, created_at, offer_command_id, turn_id, third_party FROM agent.messages
        WHERE user_id = :user_id AND conversation_id = :conversation_id AND turn_id != :turn_id
            AND EXISTS (SELECT 1 FROM lease) AND NOT EXISTS (SELECT 1 FROM replay)
        ORDER BY created_at DESC, id DESC
        LIMIT :history_limit
    )
    SELECT (SELECT holder FROM lease) AS holder, EXISTS (SELECT 1 FROM claim) AS claimed,
        (SELECT status FROM prior) AS prior_status, (SELECT answer FROM prior) AS prior_answer,
        h.role, h.content, h.created_at, h.offer_command_id, h.turn_id, h.third_party
    FROM (SELECT 1) AS one LEFT JOIN history AS h ON true
    ORDER BY h.created_at DESC, h.id DESC
    """
    )
    .bindparams(bindparam("history_limit", HISTORY_LIMIT))
    .columns(
        column("holder", String),
        column("claimed", Boolean),
        column("prior_status", String),
        column("prior_answer", JSONB),
        column("role", String),
        column("content", String),
        column("created_at", DateTime(timezone=True)),
        column("offer_command_id", String),
        column("turn_id", String),
        column("third_party", String),
    )
)
CLAIMED = select(turns.c.status, turns.c.answer).where(
    turns.c.user_id == bindparam("user_id"), turns.c.turn_key == bindparam("turn_key")
)


# A lease outlives a crashed holder by at most this long. A live holder renews it every third of
# that, so the lease may be short however long the model takes: a crashed agent's turn, redelivered
# after the consumer's few-second ack wait, takes the user over seconds later, not minutes.
LEASE_SECONDS = 8.0
ACQUIRE = text(
    """
    INSERT INTO agent.user_leases (user_id, holder, expires_at)
    VALUES (:user_id, :holder, clock_timestamp() + make_interval(secs => :ttl))
    ON CONFLICT (user_id) DO UPDATE
        SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
        WHERE agent.user_leases.expires_at < clock_timestamp()
    RETURNING holder
    """
)
RELEASE = text("DELETE FROM agent.user_leases WHERE user_id = :user_id AND holder = :holder")
# Every lease a store holds, renewed together: the ones still held come back.
RENEW_HELD = text(
    """
    UPDATE agent.user_leases AS lease
    SET expires_at = clock_timestamp() + make_interval(secs => :ttl)
    FROM unnest(CAST(:users AS text[]), CAST(:holders AS text[])) AS held(user_id, holder)
    WHERE lease.user_id = held.user_id AND lease.holder = held.holder
    RETURNING lease.user_id, lease.holder
    """
)
# The end of a turn: each part a data-modifying CTE of one statement, so all or none commit.
FINISH = text(
    """
    WITH reply AS (
        INSERT INTO agent.messages
            (user_id, conversation_id, role, content, turn_id, created_at, offer_command_id, third_party)
        VALUES (
            :user_id, :conversation_id, 'assistant', :content, :turn_id, :at, :offer_command_id, :third_party
        )
        ON CONFLICT ON CONSTRAINT uq_messages_turn_role DO NOTHING
    ), answered AS (
        UPDATE agent.turns SET status = 'done', answer = CAST(:answer AS jsonb), updated_at = :at
        WHERE :settled AND user_id = :user_id AND turn_key = :turn_key
    )
    DELETE FROM agent.user_leases WHERE user_id = :user_id AND holder = :holder
    """
)
LEASE_LIVE = text(
    "SELECT 1 FROM agent.user_leases WHERE user_id = :user_id AND expires_at > clock_timestamp()"
)
