from calagent.agent.app import create_app
from calagent.runtime.service import run

if __name__ == "__main__":
    run(create_app, "agent")
